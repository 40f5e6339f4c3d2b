// SPDX-License-Identifier: MIT
/*
 * blockfs's FUSE session loop: one reader of /dev/fuse at a time.
 *
 * libfuse's multi-threaded loop leaves every idle thread blocked in
 * read(/dev/fuse), and the kernel wakes them first in, first out, so a
 * program that asks one thing at a time meets a cold thread each time.
 * Here one thread holds the reader's role. It answers what it reads
 * itself and reads again, hot, unless the request is about to wait: then,
 * before it waits, it hands the role to an idle thread (or starts one, up
 * to max_threads), so that other requests do not wait behind it. The code
 * below says when, by calling bfs_handoff() before it decodes much, reads
 * a backing file the page cache cannot serve, walks an index or waits
 * for another thread's block; on a remote SOURCE every request is taken
 * to wait (inline_ok()). When several programs' requests queue behind the
 * reader, it hands over too (queueing()), so that another core helps.
 *
 * Before it sleeps, the reader polls /dev/fuse for a while, yielding its
 * CPU to anything else runnable there. On virtual machines whose idle
 * vCPUs halt (a wakeup then costs the host a reschedule), a FUSE round
 * trip through a thread that slept took several times as long as through
 * one that polled (doc/decisions/0003-fuse-loop.md). How long it polls
 * adapts, between 0 and -o busy_poll microseconds (adapt_spin()): a poll
 * that expires is CPU taken from the program and the threads working for
 * it, on a machine with few cores.
 *
 * SIGINT, SIGTERM and SIGHUP end the loop: their handler wakes the
 * thread that started it, which calls bfs_loop_conf.on_stop while the
 * others still answer requests (blockfs then waits for its pushes into the
 * page cache, which may wait for pages a READ holds locked), then stops the
 * others and joins them. A request being answered is answered first.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/common.h"
#include "blockfs/handoff.h"
#include "blockfs/log.h"
#include "loop.h"

struct loop {
	struct fuse_session *se;
	int fd;		  /* /dev/fuse, made non-blocking */
	int stop_fd;	  /* eventfd, written once: the loop is to end */
	int sig_fd;	  /* eventfd, written by on_signal() */
	int64_t spin_max; /* -o busy_poll, in ns: the longest poll */
	int64_t spin_ns;  /* the reader's alone: its poll now, 0 to spin_max */
	unsigned int max_threads;
	bool remote; /* bfs_loop_conf's */

	pthread_mutex_t lock;  /* never held across a request */
	pthread_cond_t turn;   /* the reader's role is free */
	bool reading;	       /* protected by lock: a thread holds the role */
	atomic_bool stop;      /* set under lock; read by the reader without */
	unsigned int idle;     /* protected by lock: threads waiting on turn */
	unsigned int nthreads; /* protected by lock: entries of thread[] */
	pthread_t *thread;     /* protected by lock */
	int error;	       /* protected by lock: the first read's error */
};

/*
 * Requests in a row, each from another process than the one before, that
 * the reader found already waiting when it came to read: past this many it
 * hands over although nothing waits, since several programs are queueing
 * behind one thread and another core may serve them: under load.sh's 64
 * readers the loop moved fewer bytes than libfuse's loop without this, and
 * more with it. One program's requests queue too, whenever the program
 * runs on before the reader gets back to /dev/fuse (beside a CPU load, all
 * the time), and handing those over only wakes threads: counting them as
 * well made find | xargs cat beside a busy loop slower
 * (doc/decisions/0003-fuse-loop.md).
 */
#define QUEUED_RUN 4

/* One worker's state; hand_over() gets it through bfs_handoff(). */
struct worker {
	struct loop *l;
	bool reader;	     /* this thread holds the reader's role */
	unsigned int queued; /* requests in a row found waiting (QUEUED_RUN) */
	uint32_t last_pid;   /* the process of the request before */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* @buf's request header, or NULL where libfuse left the request in a pipe. */
static const struct fuse_in_header *header(const struct fuse_buf *buf)
{
	if ((buf->flags & FUSE_BUF_IS_FD) || buf->size < sizeof(struct fuse_in_header))
		return NULL;
	return buf->mem;
}

/*
 * Does the reader answer this request itself, handing over only where the
 * code below calls bfs_handoff()? On a local SOURCE, yes: what may wait
 * there (a decode, a read the page cache cannot serve, a walk) says so
 * itself. Handing every LOOKUP and listing over as well, by opcode, was
 * no better over a tree of small files, quiet or beside a busy loop
 * (bench/results/trees/2026-11-24-b744701/fuse-loop.md). On a remote
 * SOURCE an open or a stat of a backing file may wait as long as a read,
 * and nothing tells beforehand: every request but a FORGET hands over.
 */
static bool inline_ok(const struct loop *l, const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = header(buf);

	if (!l->remote)
		return true;
	return in && (in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET ||
		      in->opcode == FUSE_INTERRUPT);
}

/* Under l->lock. */
static void start_thread(struct loop *l);

/* Let go of the reader's role, and see that someone takes it. */
static void hand_over(void *arg)
{
	struct worker *w = arg;
	struct loop *l = w->l;

	if (!w->reader)
		return;
	w->reader = false;
	pthread_mutex_lock(&l->lock);
	l->reading = false;
	if (l->idle)
		pthread_cond_signal(&l->turn);
	else if (!l->stop && l->nthreads < l->max_threads)
		start_thread(l);
	pthread_mutex_unlock(&l->lock);
}

static void end_loop(struct loop *l, int rc)
{
	uint64_t one = 1;

	pthread_mutex_lock(&l->lock);
	if (rc < 0 && !l->error)
		l->error = rc;
	l->stop = true;
	pthread_cond_broadcast(&l->turn);
	pthread_mutex_unlock(&l->lock);
	if (write(l->stop_fd, &one, sizeof(one)) < 0)
		bfs_warn("cannot wake the FUSE loop's threads: %s", strerror(errno));
}

/* The first poll after polling stopped, and the shortest kept, in ns. */
#define SPIN_START 10000

/*
 * How long the reader polls next time. It polled for l->spin_ns, slept,
 * and the request came @waited ns after it began to wait. If that was
 * within the longest poll, a longer poll would have caught it: the next
 * poll is twice as long (SPIN_START after none), up to spin_max. If it
 * came later, even the longest poll would only have taken CPU from the
 * others: the next is half as long, and none below SPIN_START. A request
 * that the poll caught changes nothing. So a program that asks one thing
 * at a time keeps the reader polling, while one that works on each reply
 * for longer than the poll (find through directories of many names), or an
 * idle mount, stops it. @waited includes the wakeup, so a gap just short
 * of spin_max may count as a longer one.
 */
static void adapt_spin(struct loop *l, int64_t waited)
{
	if (waited <= l->spin_max) {
		l->spin_ns = l->spin_ns ? l->spin_ns * 2 : SPIN_START;
		if (l->spin_ns > l->spin_max)
			l->spin_ns = l->spin_max;
	} else if (l->spin_ns) {
		l->spin_ns /= 2;
		if (l->spin_ns < SPIN_START)
			l->spin_ns = 0;
	}
}

/*
 * The next request into @buf: polled for l->spin_ns, then waited for
 * (adapt_spin()); *@queued tells whether it was there at once.
 * Return: its size, 0 when the loop is to end, or -errno.
 */
static int receive(struct loop *l, struct fuse_buf *buf, bool *queued)
{
	struct pollfd pfd[2] = {
		{ .fd = l->fd, .events = POLLIN },
		{ .fd = l->stop_fd, .events = POLLIN },
	};
	int64_t start = 0, t;
	bool slept = false;

	*queued = true;
	for (;;) {
		int res = fuse_session_receive_buf(l->se, buf);

		if (res != -EAGAIN && res != -EINTR) {
			if (slept && res > 0 && l->spin_max)
				adapt_spin(l, now_ns() - start);
			return res; /* 0: unmounted (libfuse has seen ENODEV) */
		}
		t = now_ns();
		*queued = false;
		if (!start)
			start = t;
		if (!slept && t - start < l->spin_ns) {
			sched_yield(); /* whoever else could run here goes first */
			continue;
		}
		slept = true;
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return -errno;
		if (pfd[1].revents)
			return 0;
	}
}

/*
 * Is the reader to hand over @buf's request because programs queue
 * (QUEUED_RUN)? The kernel's own notices (FORGET, RELEASE, INTERRUPT)
 * pile up with nobody waiting for them: they neither count nor become the
 * process before, since a RELEASE carries pid 0 and one program's close
 * and next open would otherwise look like two programs. When they did,
 * a busy find | xargs cat handed over far more often for no gain
 * (bench/results/trees/2026-11-24-b744701/release-pid.md).
 */
static bool queueing(struct worker *w, const struct fuse_buf *buf, bool queued)
{
	const struct fuse_in_header *in = header(buf);
	bool other;

	if (!in)
		return false;
	switch (in->opcode) {
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_INTERRUPT:
		return false;
	default:
		break;
	}
	other = in->pid != w->last_pid;
	w->last_pid = in->pid;
	if (!queued) {
		w->queued = 0;
		return false;
	}
	return other && ++w->queued >= QUEUED_RUN;
}

static void *worker_main(void *arg)
{
	struct loop *l = arg;
	struct worker w = { .l = l };
	struct fuse_buf buf = { .mem = NULL };
	bool queued;
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		if (l->reading) {
			l->idle++;
			pthread_cond_wait(&l->turn, &l->lock);
			l->idle--;
			continue;
		}
		l->reading = true;
		pthread_mutex_unlock(&l->lock);
		w.reader = true;
		do {
			rc = receive(l, &buf, &queued);
			if (rc <= 0)
				break;
			if (inline_ok(l, &buf) && !queueing(&w, &buf, queued))
				bfs_handoff_set(hand_over, &w);
			else
				hand_over(&w);
			fuse_session_process_buf(l->se, &buf);
			bfs_handoff_set(NULL, NULL);
		} while (w.reader && !l->stop); /* still the reader: read again, hot */
		if (rc <= 0) {
			end_loop(l, rc);
			pthread_mutex_lock(&l->lock);
			break;
		}
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	free(buf.mem);
	return NULL;
}

static void start_thread(struct loop *l)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, worker_main, l);

	if (rc) {
		if (l->nthreads == 0)
			bfs_err("cannot start a FUSE thread: %s", strerror(rc));
		return; /* the threads there are will do */
	}
	l->thread[l->nthreads++] = t;
}

/*
 * The running loop's sig_fd, for on_signal(): a signal may land on any
 * thread of the process (the read-ahead workers start before the loop),
 * and all a handler may do is write.
 */
static int signal_fd = -1;
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	uint64_t one = 1;
	int saved = errno;

	stop_signal = sig;
	/* a full eventfd is still readable: nothing is lost when this fails */
	(void)!write(signal_fd, &one, sizeof(one));
	errno = saved;
}

static const int stopping[] = { SIGINT, SIGTERM, SIGHUP };

int bfs_loop_run(struct fuse_session *se, const struct bfs_loop_conf *conf)
{
	struct loop l = {
		.se = se,
		.fd = fuse_session_fd(se),
		.spin_max = (int64_t)conf->busy_poll_us * 1000,
		.spin_ns = (int64_t)conf->busy_poll_us * 1000,
		.max_threads = conf->max_threads ? conf->max_threads : 1,
		.remote = conf->remote,
	};
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	struct sigaction before[BFS_ARRAY_SIZE(stopping)];
	int flags, rc;

	l.thread = calloc(l.max_threads, sizeof(*l.thread));
	if (!l.thread)
		return -ENOMEM;
	flags = fcntl(l.fd, F_GETFL);
	if (flags < 0) {
		rc = -errno;
		goto out_free;
	}
	if (fcntl(l.fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		rc = -errno;
		goto out_free;
	}
	l.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (l.stop_fd < 0) {
		rc = -errno;
		goto out_flags;
	}
	l.sig_fd = eventfd(0, EFD_CLOEXEC);
	if (l.sig_fd < 0) {
		rc = -errno;
		close(l.stop_fd);
		goto out_flags;
	}
	/*
	 * In place of libfuse's handlers (main.c), which only set a flag
	 * nobody here polls. An ignored signal stays ignored, as libfuse
	 * leaves it: a shell starts background jobs with SIGINT ignored.
	 */
	signal_fd = l.sig_fd;
	stop_signal = 0;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(stopping); i++) {
		sigaction(stopping[i], NULL, &before[i]);
		if (before[i].sa_handler != SIG_IGN)
			sigaction(stopping[i], &sa, NULL);
	}
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.turn, NULL);

	pthread_mutex_lock(&l.lock);
	start_thread(&l);
	rc = l.nthreads ? 0 : -EAGAIN;
	pthread_mutex_unlock(&l.lock);
	if (rc == 0) {
		struct pollfd pfd[2] = {
			{ .fd = l.stop_fd, .events = POLLIN },
			{ .fd = l.sig_fd, .events = POLLIN },
		};

		while (poll(pfd, 2, -1) < 0 && errno == EINTR)
			;
		if (pfd[1].revents) {
			bfs_info("signal %d: unmounting", (int)stop_signal);
			if (conf->on_stop)
				conf->on_stop(conf->stop_arg);
			fuse_session_exit(se);
		}
		end_loop(&l, 0);
	}
	/* Threads start only under the lock and never once stop is set. */
	for (unsigned int i = 0; i < l.nthreads; i++)
		pthread_join(l.thread[i], NULL);
	if (rc == 0)
		rc = l.error;
	pthread_cond_destroy(&l.turn);
	pthread_mutex_destroy(&l.lock);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(stopping); i++)
		sigaction(stopping[i], &before[i], NULL);
	signal_fd = -1;
	close(l.sig_fd);
	close(l.stop_fd);
out_flags:
	fcntl(l.fd, F_SETFL, flags);
out_free:
	free(l.thread);
	fuse_session_reset(se);
	return rc;
}
