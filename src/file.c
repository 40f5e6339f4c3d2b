// SPDX-License-Identifier: MIT
/*
 * File versions: a backing file as one version of its bytes was built
 * (its format settled, its index walked or loaded), the lease of its
 * descriptor (uses), the hints that steer its reads, and its mapping. The
 * read path through a version is read.c, over decode.c and unit.c.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/handoff.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/settle.h"
#include "blockfs/spill.h"
#include "blockfs/stats.h"
#include "blockfs/vocab.h"
#include "blockfs/workq.h"
#include "file_i.h"

static atomic_uint_fast64_t next_id = 1;

/*
 * Decoded chained blocks (BFS_BLK_CHAIN) that a decode step passed on its
 * way to a later block while another thread was filling them (a block
 * being loaded cannot be waited for: see decode.c, chain_pass()). Kept for that
 * thread, which would otherwise find no decoder parked at its block any
 * more and start again from the chain's first. Bounded; the oldest go.
 */
#define STASH_MAX   32
#define STASH_BYTES (64u << 20)

struct bfs_stash {
	size_t n;
	uint64_t bytes;
	struct {
		size_t k;
		uint8_t *data;
		uint32_t len;
	} e[STASH_MAX];
};

static void stash_free(struct bfs_file *f)
{
	if (!f->stash)
		return;
	for (size_t i = 0; i < f->stash->n; i++)
		free(f->stash->e[i].data);
	free(f->stash);
	f->stash = NULL;
}

/* Drop entry @i of @s. */
static void stash_drop(struct bfs_stash *s, size_t i)
{
	free(s->e[i].data);
	s->bytes -= s->e[i].len;
	memmove(&s->e[i], &s->e[i + 1], (s->n - i - 1) * sizeof(s->e[0]));
	s->n--;
}

bool bfs_file_stash_take(struct bfs_file *f, size_t k, uint8_t *dst, uint32_t len)
{
	struct bfs_stash *s = f->stash;

	for (size_t i = 0; s && i < s->n; i++) {
		if (s->e[i].k != k)
			continue;
		bool ok = s->e[i].len == len;

		if (ok)
			memcpy(dst, s->e[i].data, len);
		stash_drop(s, i);
		return ok;
	}
	return false;
}

bool bfs_file_stash_put(struct bfs_file *f, size_t k, uint8_t *data, uint32_t len)
{
	struct bfs_stash *s = f->stash;

	if (len > STASH_BYTES)
		return false;
	if (!s && !(s = f->stash = calloc(1, sizeof(*s))))
		return false;
	while (s->n && (s->n == STASH_MAX || s->bytes + len > STASH_BYTES))
		stash_drop(s, 0);
	s->e[s->n].k = k;
	s->e[s->n].data = data;
	s->e[s->n].len = len;
	s->bytes += len;
	s->n++;
	return true;
}

/*
 * A version of the file open as @fd (its stat @st, or NULL to take it),
 * or (@fd -1) of the one @st describes, read whole into @whole.
 */
static int file_new(struct bfs_file **out, int fd, uint8_t *whole, const struct stat *st, int side,
		    const struct bfs_codec *codec, const char *name, const struct bfs_file_env *env,
		    atomic_uint_fast64_t *walked)
{
	struct bfs_io side_io, *sidep = NULL, mem, *aio;
	struct bfs_io_ahead ahead = { 0 };
	struct stat sst;
	struct bfs_file *f;
	int rc = -ENOMEM;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->name = strdup(name);
	f->ctr = bfs_counters_new(env->mount);
	if (!f->name || !f->ctr)
		goto out_free;
	if (st) {
		f->st = *st;
	} else if (fstat(fd, &f->st) < 0) {
		rc = -errno;
		goto out_free;
	}
	atomic_init(&f->refs, 1);
	atomic_init(&f->readers, 0);
	atomic_init(&f->last_bad, SIZE_MAX);
	atomic_init(&f->advice, env->advice);
	atomic_init(&f->readpath, env->readpath);
	f->id = atomic_fetch_add(&next_id, 1);
	f->fd = fd;
	f->uses = fd >= 0;
	bfs_mutex_init(&f->fd_lock);
	bfs_mutex_init(&f->chain_lock);
	bfs_mutex_init(&f->unit_lock);
	pthread_cond_init(&f->unit_cond, NULL);
	f->env = env;
	bfs_io_init_fd(&f->io, fd, (uint64_t)f->st.st_size);
	bfs_map_init(&f->map, (size_t)f->st.st_size);
	bfs_index_init(&f->idx, (uint64_t)f->st.st_size);
	f->idx.conf = &env->codecs;
	/*
	 * A big file is read through requests that grow as a walk goes on
	 * (bfs_io_ahead): its first bytes, which settle the format, are the
	 * start of the walk's first request.
	 */
	aio = &f->io;
	if (codec && !whole && (uint64_t)f->st.st_size > BFS_WHOLE_MAX)
		aio = bfs_io_ahead_init(&ahead, &f->io, walked,
					env->remote ? BFS_IO_AHEAD_REMOTE_THREADS : 0);
	if (codec) {
		/* The name said @codec's family; the bytes say which, if any. */
		if (whole)
			bfs_io_init_mem(&mem, whole, (size_t)f->st.st_size);
		rc = bfs_codec_settle(&env->codecs, codec, whole ? &mem : aio, &f->codec,
				      &f->found);
		if (!f->codec) /* else counted with the scan's, below */
			BFS_COUNT(f->ctr, syscalls, atomic_load(&f->io.nread));
		if (rc == -EMEDIUMTYPE)
			f->named = codec; /* logged by the first read (readv_as()) */
		else if (rc < 0)
			goto out_destroy;
		codec = f->codec;
	}
	if (codec) {
		size_t size = (size_t)f->st.st_size;
		struct bfs_io *io = &f->io;

		if (side >= 0 && fstat(side, &sst) == 0 && S_ISREG(sst.st_mode)) {
			bfs_io_init_fd(&side_io, side, (uint64_t)sst.st_size);
			sidep = &side_io;
		}

		/*
		 * index_cache hook (index_cache.h): a kept index replaces the
		 * scan. A small file is read whole, once: its scan and measure
		 * then cost one read, no entry is kept for it, and looking for
		 * one would cost a tree of small files an openat each.
		 */
		rc = size <= BFS_WHOLE_MAX ? 1 :
					     bfs_icache_load(env->icache, &f->st, codec, &f->idx);
		if (rc > 0 && size > BFS_WHOLE_MAX)
			bfs_handoff(); /* a walk: milliseconds to minutes */
		if (rc > 0) {
			if (!whole && size > 0 && size <= BFS_WHOLE_MAX && (whole = malloc(size)) &&
			    bfs_io_read(&f->io, whole, size, 0) < 0) {
				free(whole);
				whole = NULL;
			}
			if (whole) {
				bfs_io_init_mem(&mem, whole, size);
				io = &mem;
			}
			/*
			 * What the walk asked for, not the requests that served
			 * it, says what a kept entry saves a later mount
			 * (bfs_icache_save()).
			 */
			struct bfs_io *walk = io == &f->io ? aio : io;

			rc = codec->scan(walk, sidep, &f->idx);
			if (rc == 0)
				rc = bfs_measure(&f->idx, io, codec, env->workq);
			if (rc == 0)
				(void)bfs_icache_save(env->icache, fd, &f->st, codec, &f->idx,
						      atomic_load(&walk->nread));
		}
		BFS_COUNT(f->ctr, syscalls, atomic_load(&f->io.nread));
		/*
		 * And a very small one is kept: no READ of it needs the backing
		 * file again, nor a descriptor (bfs_file_use()).
		 */
		if (whole && size <= BFS_HEAD_KEEP) {
			f->head = whole;
			bfs_io_init_mem(&f->io, f->head, size);
			f->io.fd = fd;
		} else {
			free(whole);
		}
		whole = NULL;
		if (rc < 0) {
			if (rc == -ENOTSUP && f->idx.why[0]) /* the scan's reason */
				bfs_err("%s: %s", name, f->idx.why);
			goto out_destroy;
		}
		bfs_dbg("%s: %s, %zu blocks, %" PRIu64 " bytes, %" PRIu64 " backing reads to index",
			name, codec->name, f->idx.n, (uint64_t)atomic_load(&f->idx.usize),
			(uint64_t)atomic_load(&f->io.nread));
		if (f->idx.broken)
			bfs_warn("%s: %s", name, f->idx.why);
	}
	bfs_io_ahead_destroy(&ahead); /* the walk is over, or never was (a misnamed file) */
	free(whole);		      /* a file shown unchanged reads its descriptor */
	*out = f;
	return 0;

out_destroy:
	bfs_io_ahead_destroy(&ahead);
	bfs_index_destroy(&f->idx);
	pthread_mutex_destroy(&f->fd_lock);
	pthread_mutex_destroy(&f->chain_lock);
	pthread_mutex_destroy(&f->unit_lock);
	pthread_cond_destroy(&f->unit_cond);
out_free:
	bfs_counters_put(f->ctr);
	free(f->head);
	free(f->name);
	free(f);
	free(whole);
	return rc;
}

int bfs_file_open(struct bfs_file **out, int fd, const struct stat *st, int side,
		  const struct bfs_codec *codec, const char *name, const struct bfs_file_env *env,
		  atomic_uint_fast64_t *walked)
{
	return file_new(out, fd, NULL, st, side, codec, name, env, walked);
}

int bfs_file_open_whole(struct bfs_file **out, uint8_t *whole, const struct stat *st, int side,
			const struct bfs_codec *codec, const char *name,
			const struct bfs_file_env *env)
{
	return file_new(out, -1, whole, st, side, codec, name, env, NULL);
}

int bfs_file_misnamed(struct bfs_file *f)
{
	if (!f->found)
		return 0;
	/* one line per version, as for a bad block */
	if (atomic_exchange(&f->last_bad, BFS_SETTLE_FAILED) != BFS_SETTLE_FAILED)
		bfs_err("%s: named as %s but holds %s: EIO", f->name, f->named->name, f->found);
	BFS_COUNT(f->ctr, errors, 1);
	return -EIO;
}

/* Drop @f's spilled blocks: the version goes, no read is in flight. */
static void units_free(struct bfs_file *f)
{
	for (size_t k = 0; k < f->unit_n; k++)
		bfs_spill_drop(f->units[k].s);
	free(f->units);
}

void bfs_file_put(struct bfs_file *f)
{
	unsigned int was;

	if (!f)
		return;
	was = atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel);
	assert(was > 0); /* a put without a get */
	if (was != 1)
		return;
	bfs_map_drop(f->env->maps, &f->map);
	if (f->fd >= 0)
		close(f->fd);
	pthread_mutex_destroy(&f->fd_lock);
	stash_free(f);
	pthread_mutex_destroy(&f->chain_lock);
	units_free(f);
	pthread_mutex_destroy(&f->unit_lock);
	pthread_cond_destroy(&f->unit_cond);
	bfs_index_destroy(&f->idx);
	bfs_counters_put(f->ctr);
	free(atomic_load(&f->touched));
	free(f->head);
	free(f->name);
	free(f);
}

bool bfs_file_use(struct bfs_file *f)
{
	bool open;

	bfs_mutex_lock(&f->fd_lock);
	open = f->fd >= 0 || f->head; /* a head is the whole backing file */
	if (open)
		f->uses++;
	bfs_mutex_unlock(&f->fd_lock);
	return open;
}

void bfs_file_use_fd(struct bfs_file *f, int fd)
{
	bfs_mutex_lock(&f->fd_lock);
	if (f->fd < 0) {
		f->fd = fd;
		f->io.fd = fd;
		fd = -1;
	}
	f->uses++;
	bfs_mutex_unlock(&f->fd_lock);
	if (fd >= 0)
		close(fd); /* another opener got there first */
}

void bfs_file_unuse(struct bfs_file *f)
{
	int fd = -1;

	if (!f)
		return;
	bfs_mutex_lock(&f->fd_lock);
	assert(f->uses > 0); /* an unuse without a use */
	if (--f->uses == 0) {
		fd = f->fd;
		f->fd = -1;
		f->io.fd = -1;
	}
	bfs_mutex_unlock(&f->fd_lock);
	if (fd >= 0)
		close(fd);
}

/*
 * The backing bytes behind decompressed [@off, @off + @len) of @f, as far
 * as the exact part of the index knows them: only a hint follows, so an
 * unknown end runs to the end of the backing file.
 */
static void backing_span(struct bfs_file *f, uint64_t off, uint64_t len, uint64_t *coff,
			 uint64_t *clen)
{
	uint64_t csize = (uint64_t)f->st.st_size, cend = csize;
	size_t a, b;

	if (!f->codec) {
		*coff = off < csize ? off : csize;
		*clen = bfs_range_ok(off, len, csize) ? len : csize - *coff;
		return;
	}
	if (bfs_index_find(&f->idx, off, &a) < 0) {
		*coff = 0; /* not settled that far: the whole file */
		*clen = csize;
		return;
	}
	*coff = f->idx.blk[a].coff;
	if (bfs_index_find(&f->idx, off + len - 1, &b) == 0)
		cend = f->idx.blk[b].coff + f->idx.blk[b].clen;
	*clen = cend > *coff ? cend - *coff : 0;
}

void bfs_file_advise(struct bfs_file *f, int advice, uint64_t off, uint64_t len)
{
	uint64_t coff = 0, clen = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint8_t *base;

	if (len)
		backing_span(f, off, len, &coff, &clen);
	else
		clen = (uint64_t)f->st.st_size;
	if (!clen)
		return;
	bfs_mutex_lock(&f->fd_lock); /* so the number cannot be reused meanwhile */
	if (f->fd >= 0)
		(void)posix_fadvise(f->fd, (off_t)coff, (off_t)(len ? clen : 0),
				    bfs_advice_fadv(advice));
	bfs_mutex_unlock(&f->fd_lock);
	/* only a live mapping: a hint is no reason to map a file */
	base = bfs_advice_madv(advice) >= 0 ? bfs_file_map_enter(f, false) : NULL;
	if (base) {
		uint64_t start = coff & ~(page - 1); /* madvise wants a page-aligned start */

		(void)madvise((void *)(base + start), clen + coff - start, bfs_advice_madv(advice));
		bfs_file_map_exit(f);
	}
}

void bfs_file_supersede(struct bfs_file *f)
{
	/* seq_cst both sides: a pusher counts itself, then looks at the flag */
	atomic_store(&f->superseded, true);
	while (atomic_load(&f->pushing))
		sched_yield();
}

uint64_t bfs_file_size(const struct bfs_file *f)
{
	return f->codec ? atomic_load(&f->idx.usize) : (uint64_t)f->st.st_size;
}

bool bfs_file_block_at(const struct bfs_file *f, uint64_t off, uint64_t *start, uint64_t *len)
{
	size_t k;

	if (!f->codec || bfs_index_find(&f->idx, off, &k) < 0)
		return false;
	*start = f->idx.blk[k].uoff;
	*len = f->idx.blk[k].usize;
	return true;
}

bool bfs_file_block_chained(const struct bfs_file *f, uint64_t off)
{
	size_t k;

	return f->codec && bfs_index_find(&f->idx, off, &k) == 0 &&
	       (f->idx.blk[k].flags & BFS_BLK_CHAIN);
}

uint32_t bfs_file_block_max(const struct bfs_file *f)
{
	return f->idx.max_usize;
}

uint32_t bfs_file_block_size(const struct bfs_file *f)
{
	return f->idx.block_size;
}

bool bfs_file_stale(const struct bfs_file *f, const struct stat *now)
{
	return now->st_ino != f->st.st_ino || now->st_dev != f->st.st_dev ||
	       now->st_size != f->st.st_size || now->st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
	       now->st_mtim.tv_nsec != f->st.st_mtim.tv_nsec ||
	       now->st_ctim.tv_sec != f->st.st_ctim.tv_sec ||
	       now->st_ctim.tv_nsec != f->st.st_ctim.tv_nsec;
}

/* The mapping lost a page: pread from now on, and say so once. */
void bfs_file_map_failed(struct bfs_file *f)
{
	if (bfs_map_fail(&f->map))
		bfs_err("%s: the backing file shrank under its mapping: reading with pread",
			f->name);
}

struct populate_job {
	struct bfs_work work;
	struct bfs_file *f; /* a reference and a use of its descriptor */
};

static void populate_run(struct bfs_work *w)
{
	struct populate_job *j = (struct populate_job *)w;
	const uint8_t *base = bfs_file_map_enter(j->f, false);

	if (base) {
		if (bfs_map_populate(&j->f->map, base) < 0)
			bfs_file_map_failed(j->f);
		bfs_file_map_exit(j->f);
	}
	bfs_file_unuse(j->f);
	bfs_file_put(j->f);
	free(j);
}

/* populate=async: pre-fault a new mapping from a worker; a hint, so no errors. */
static void queue_populate(struct bfs_file *f)
{
	struct populate_job *j;

	if (!bfs_workq_threads(f->env->workq) || !bfs_file_use(f))
		return;
	j = malloc(sizeof(*j));
	if (j) {
		*j = (struct populate_job){ .work.fn = populate_run, .f = bfs_file_get(f) };
		if (bfs_workq_try(f->env->workq, &j->work))
			return;
		bfs_file_put(f);
		free(j);
	}
	bfs_file_unuse(f);
}

const uint8_t *bfs_file_map_enter(struct bfs_file *f, bool make)
{
	const uint8_t *base;
	int made;

	if (!make && !bfs_map_live(&f->map))
		return NULL;
	base = bfs_map_enter(f->env->maps, &f->map, f->fd, bfs_advice_madv(atomic_load(&f->advice)),
			     &made);
	if (made < 0)
		bfs_warn("%s: cannot map (%s): reading with pread", f->name, strerror(-made));
	if (made > 0) {
		BFS_COUNT(f->ctr, syscalls, 1);
		if (bfs_maps_populate_async(f->env->maps))
			queue_populate(f);
	}
	return base;
}

void bfs_file_map_exit(struct bfs_file *f)
{
	bfs_map_exit(&f->map);
}
