// SPDX-License-Identifier: MIT
/*
 * blockfs-pack's output side: writing one compressed stream to its output
 * (and a BGZF file's .gzi), messages and the progress line on stderr,
 * and the clean-up an interrupt needs. The command line and which file
 * goes where are blockfs-pack.c's; compressing is pack_stream.c's.
 *
 * Safety: every output is written under a hidden temporary name in its
 * target directory, synced, and renamed into place only when complete,
 * never over an existing file unless -f or -u (renameat2
 * RENAME_NOREPLACE). An interrupt (SIGINT, SIGTERM, SIGHUP) removes the
 * temporary files, or cuts a file appended to in place back to its
 * length; inputs are only ever read. A full disk, a read-only or an
 * over-quota target stops the run (pk_stop_note()).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pack.h"

#define PROGRESS_EVERY_NS 200000000L

/* ---- messages ---- */

static bool progress_shown;

void pk_progress_clear(void)
{
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		progress_shown = false;
	}
}

void pk_err(const char *fmt, ...)
{
	va_list ap;

	pk_progress_clear();
	fputs("blockfs-pack: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "1.50 GiB" into @buf. */
static const char *human(char *buf, size_t len, double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (b >= 1024 && u + 1 < BFS_ARRAY_SIZE(unit)) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
	return buf;
}

/* ---- temporary files and interrupts ---- */

/* What the handler removes; written with signals blocked. */
static char *volatile cleanup_path[2];
static volatile int cleanup_fd = -1;
static volatile off_t cleanup_len;
static mode_t file_mode; /* 0666 & ~umask: for outputs without an input file */

static void on_signal(int sig)
{
	for (int i = 0; i < 2; i++)
		if (cleanup_path[i])
			unlink(cleanup_path[i]);
	if (cleanup_fd >= 0)
		(void)!ftruncate(cleanup_fd, cleanup_len);
	if (progress_shown)
		(void)!write(STDERR_FILENO, "\r\033[K", 4);
	signal(sig, SIG_DFL);
	raise(sig);
}

void pk_output_init(void)
{
	struct sigaction sa;
	mode_t um;

	um = umask(0);
	umask(um);
	file_mode = 0666 & ~um;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed pipe becomes EPIPE and a message */
}

static void signals_block(sigset_t *old)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &s, old);
}

static void set_cleanup(int slot, char *path)
{
	sigset_t old;

	signals_block(&old);
	cleanup_path[slot] = path;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void pk_cleanup_truncate(int fd, uint64_t len)
{
	sigset_t old;

	signals_block(&old);
	cleanup_len = (off_t)len;
	cleanup_fd = fd;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int pk_tmp_open(int slot, const char *final, char **tmp)
{
	const char *slash = strrchr(final, '/');
	const char *base = slash ? slash + 1 : final;
	int dirlen = slash ? (int)(slash - final + 1) : 0;
	int fd;

	/* ".NAME.XXXXXX", the name cut so that it fits NAME_MAX */
	if (asprintf(tmp, "%.*s.%.*s.XXXXXX", dirlen, final, NAME_MAX - 8, base) < 0)
		return -ENOMEM;
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		free(*tmp);
		*tmp = NULL;
		return -err;
	}
	set_cleanup(slot, *tmp);
	return fd;
}

void pk_tmp_abort(int slot, int fd, char *tmp)
{
	if (!tmp)
		return;
	close(fd);
	unlink(tmp);
	set_cleanup(slot, NULL);
	free(tmp);
}

int pk_tmp_commit(int slot, int fd, char *tmp, const char *final, bool force)
{
	int rc = 0;

	if (fsync(fd) < 0 && errno != EINVAL)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno; /* NFS reports write errors here */
	if (rc == 0) {
		if (force)
			rc = rename(tmp, final);
		else {
			rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE);
			if (rc < 0 && (errno == EINVAL || errno == ENOSYS)) {
				/* a filesystem without RENAME_NOREPLACE: link(2) refuses too */
				rc = link(tmp, final);
				if (rc == 0)
					unlink(tmp);
			}
		}
		rc = rc < 0 ? -errno : 0;
	}
	if (rc < 0)
		unlink(tmp);
	set_cleanup(slot, NULL);
	free(tmp);
	return rc;
}

/* ---- progress ---- */

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

void pk_progress_start(struct pk_progress *p, bool on)
{
	p->on = on;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	p->last = p->t0;
}

static void tick(void *ctx, uint64_t in_done)
{
	struct pk_progress *p = ctx;
	struct timespec now;
	char d[32], t[32], r[32];
	uint64_t done = p->base + in_done;
	double el, rate;

	if (!p->on)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (progress_shown && secs(&p->last, &now) * 1e9 < PROGRESS_EVERY_NS)
		return; /* the first line at once, then five a second */
	p->last = now;
	el = secs(&p->t0, &now);
	rate = el > 0 ? (double)done / el : 0;
	human(d, sizeof(d), (double)done);
	human(r, sizeof(r), rate);
	if (p->total && rate > 0 && done <= p->total) {
		long eta = (long)((double)(p->total - done) / rate + 0.5);

		fprintf(stderr, "\r%s / %s  %s/s  ETA %ld:%02ld\033[K", d,
			human(t, sizeof(t), (double)p->total), r, eta / 60, eta % 60);
	} else {
		fprintf(stderr, "\r%s  %s/s\033[K", d, r);
	}
	progress_shown = true;
}

/* ---- one output ---- */

/*
 * A full disk, a read-only or an over-quota target fails every later
 * output the same way: one message, then stop (5,848 lines of "No space
 * left on device" helped nobody).
 */
const char *pk_stop_note(struct pk_writer *w, int err)
{
	if (err != ENOSPC && err != EROFS && err != EDQUOT)
		return "";
	w->stop = err;
	return "; stopping, every further output would fail the same way (rerun with -u "
	       "to go on where this stopped)";
}

static bool is_root(void)
{
	return geteuid() == 0;
}

/* Owner, mode and times of @st onto the open output @fd. */
static void copy_meta(int fd, const struct stat *st)
{
	struct timespec ts[2];

	if (!st) {
		(void)fchmod(fd, file_mode);
		return;
	}
	if (is_root())
		(void)!fchown(fd, st->st_uid, st->st_gid); /* before chmod: it clears set-id bits */
	(void)fchmod(fd, st->st_mode & 07777);
	ts[0] = st->st_atim;
	ts[1] = st->st_mtim;
	(void)futimens(fd, ts);
}

int pk_write(struct pk_writer *w, int in, const struct stat *ist, const char *in_name,
	     const char *out_path)
{
	const struct pk_opts *o = w->o;
	struct pk_result res;
	char *tmp = NULL, *gtmp = NULL, *gzi_path = NULL;
	int out = STDOUT_FILENO, gfd = -1, rc;
	const char *side = "write";
	struct timespec t0, t1;

	if (out_path) {
		out = pk_tmp_open(0, out_path, &tmp);
		if (out < 0) {
			pk_err("%s: cannot create a file beside it: %s%s", out_path, strerror(-out),
			       pk_stop_note(w, -out));
			return 1;
		}
		if (o->codec == PK_GZIP) {
			if (asprintf(&gzi_path, "%s.gzi", out_path) < 0) {
				gzi_path = NULL;
				rc = -ENOMEM;
				goto fail;
			}
			gfd = pk_tmp_open(1, gzi_path, &gtmp);
			if (gfd < 0) {
				rc = gfd;
				gfd = -1;
				goto fail;
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = pk_pool_run(w->pool, in, out, gfd, &res, tick, &w->prog, &side);
	if (rc < 0)
		goto fail;
	w->prog.base += res.in_bytes;
	if (!out_path)
		return 0;
	copy_meta(out, ist);
	rc = pk_tmp_commit(0, out, tmp, out_path, pk_replacing(o));
	tmp = NULL;
	if (rc < 0) {
		pk_tmp_abort(1, gfd, gtmp);
		free(gzi_path);
		if (rc == -EEXIST)
			pk_err("%s: already exists; use -f to overwrite", out_path);
		else
			pk_err("%s: %s%s", out_path, strerror(-rc), pk_stop_note(w, -rc));
		return 1;
	}
	/*
	 * One member needs no index (bgzip and blockfs find it at offset 0),
	 * and a .gzi beside it would be the one file by which a packed tree
	 * differs from its source. One left from an earlier output would be
	 * stale: it goes.
	 */
	if (gtmp && (!res.indexed || res.blocks <= 1)) {
		pk_tmp_abort(1, gfd, gtmp);
		if (pk_replacing(o))
			(void)unlink(gzi_path);
	} else if (gtmp) {
		(void)fchmod(gfd, (ist ? ist->st_mode : file_mode) & 0666);
		rc = pk_tmp_commit(1, gfd, gtmp, gzi_path, pk_replacing(o));
		if (rc < 0)
			pk_err("%s: %s (%s itself is complete; blockfs walks its members)%s",
			       gzi_path,
			       rc == -EEXIST ? "already exists; use -f to overwrite" :
					       strerror(-rc),
			       out_path, pk_stop_note(w, -rc));
	}
	free(gzi_path);
	if (o->verbose) {
		char a[32], b[32], r[32], ratio[32] = "-";
		double el;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		el = secs(&t0, &t1);
		pk_progress_clear();
		/* decompressed / compressed, as blockfs-stat shows it */
		if (res.out_bytes)
			snprintf(ratio, sizeof(ratio), "%.2f",
				 (double)res.in_bytes / (double)res.out_bytes);
		fprintf(stderr,
			"%s -> %s: %s -> %s (ratio %s), %" PRIu64 " blocks, %" PRIu64
			" stored, %s/s%s\n",
			in_name, out_path, human(a, sizeof(a), (double)res.in_bytes),
			human(b, sizeof(b), (double)res.out_bytes), ratio, res.blocks, res.stored,
			human(r, sizeof(r), el > 0 ? (double)res.in_bytes / el : 0),
			res.indexed ? "" : ", no seek table (too many blocks)");
	}
	return 0;

fail:
	pk_tmp_abort(0, out, tmp);
	pk_tmp_abort(1, gfd, gtmp);
	free(gzi_path);
	if (strcmp(side, "read") == 0)
		pk_err("%s: read error: %s", in_name, strerror(-rc));
	else
		pk_err("%s: write error: %s%s", out_path ? out_path : "standard output",
		       strerror(-rc), pk_stop_note(w, -rc));
	return 1;
}
