/* SPDX-License-Identifier: MIT */
/*
 * blockfs-pack's private contract between its parts: the command line
 * (blockfs-pack.c), the output side that writes one stream to its file
 * with temporary names, renames, interrupt clean-up and messages
 * (pack_output.c), the compression pipeline that turns one input stream
 * into an LZ4 frame with a seek table, BGZF with its .gzi, zstd frames
 * with a seek table (the zstd seekable format) or a multi-block xz stream
 * (pack_stream.c), and the checks behind -t and --index (pack_check.c).
 * Nothing here is installed.
 */
#ifndef BLOCKFS_PACK_H
#define BLOCKFS_PACK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "blockfs/common.h"

enum pk_codec { PK_LZ4, PK_LZ4HC, PK_GZIP, PK_ZSTD, PK_XZ };

struct bfs_codec_conf;
struct bfs_icache;

/* lz4_Frame_format.md: block max sizes 64K..4M; the packer's range of -B */
#define PK_BLOCK_MIN	       (4u << 10)
#define PK_BLOCK_MAX	       (4u << 20)
/* SAM/BAM spec 4.1: bgzip puts at most 0xff00 input bytes in a member */
#define PK_BGZF_BLOCK	       0xff00u
#define PK_LZ4_DEFAULT_BLOCK   (256u << 10)
/*
 * zstd and xz: a random read decodes the whole frame or block it falls
 * in, so the block size is what one small read can cost; 1 MiB keeps
 * that near a millisecond (zstd) and tens of milliseconds (xz). blockfs
 * serves a zstd frame of up to 32 MiB as one block, and an xz block of
 * up to 64 MiB; bigger ones are decoded as a chain, span after span.
 */
#define PK_FRAME_DEFAULT_BLOCK (1u << 20)
#define PK_ZSTD_BLOCK_MAX      (32u << 20)
#define PK_XZ_BLOCK_MAX	       (64u << 20)

struct pk_opts {
	enum pk_codec codec;
	int level;	      /* checked for the codec */
	uint32_t block;	      /* decompressed bytes per block (BGZF: per member; zstd: per frame) */
	unsigned int threads; /* compression workers */
	bool csum;	      /* LZ4 block checksums */
	bool force, quiet;
	bool update; /* -u: keep outputs that are current, replace the others */
	int verbose;
	struct bfs_icache *icache; /* --index --index-cache DIR: indexes go there, or NULL */
	/* The codec settings a mount would have (--index-cache), or NULL: the defaults. */
	const struct bfs_codec_conf *codecs;
};

/* What one stream became. */
struct pk_result {
	uint64_t in_bytes;  /* read */
	uint64_t out_bytes; /* written, table included */
	uint64_t blocks;    /* data blocks (BGZF: data members) */
	uint64_t stored;    /* blocks kept raw because they would not shrink */
	bool indexed;	    /* a seek table (LZ4, zstd) or .gzi (BGZF) was written; xz: its index */
};

/* Called from the writing thread after each chunk: bytes of input done so far. */
typedef void pk_tick_fn(void *ctx, uint64_t in_done);

struct pk_pool;

/* Start @o->threads workers; they live until pk_pool_free(). */
BFS_MUST_CHECK int pk_pool_new(struct pk_pool **out, const struct pk_opts *o);
void pk_pool_free(struct pk_pool *p);

/**
 * pk_pool_run() - compress all of @in (read to end of file) into @out.
 * @gzi:  BGZF only: where the .gzi goes, or -1 for none.
 * @tick: progress callback or NULL.
 * Blocks are compressed on all workers; the calling thread reads input
 * and writes output in order, so memory stays at two chunks per worker.
 * Return: 0, or -errno with *@side = "read" (from @in) or "write".
 */
BFS_MUST_CHECK int pk_pool_run(struct pk_pool *p, int in, int out, int gzi, struct pk_result *res,
			       pk_tick_fn *tick, void *ctx, const char **side);

/*
 * -t: check @path. Return 0 when good; 1 after printing one line to
 * stderr that names the file and what is wrong.
 */
int pk_check_file(const char *path, const struct pk_opts *o);

/*
 * -u: is @path a complete output of @o->codec, in the layout @o asks for
 * (blocks of @o->block bytes but the last, seekable), that decodes to
 * @usize bytes? The codec blockfs would serve it with must be that one.
 * Its structure is checked, cheaply (the LZ4 or zstd seek table, the xz
 * index, or a walk of the block headers, and the BGZF end marker), not
 * every block: that is -t.
 * Return: 1 or 0.
 */
int pk_output_current(const char *path, const struct pk_opts *o, uint64_t usize);

/*
 * --index: give @path a seek table (LZ4, appended in place) or a .gzi
 * (BGZF); with @o->icache, leave @path as it is and keep the index a
 * mount's walk would make in the index cache instead (LZ4, BGZF, and
 * plain gzip's checkpoints). Return 0, or 1 after printing why not.
 */
int pk_index_file(const char *path, const struct pk_opts *o);

/* Overwrite what is there: -f, or -u for an output that is not current. */
static inline bool pk_replacing(const struct pk_opts *o)
{
	return o->force || o->update;
}

/* ---- pack_output.c ---- */

/* The progress line: bytes of input done, of @total (0: unknown). */
struct pk_progress {
	bool on;
	uint64_t total; /* 0: unknown */
	uint64_t base;	/* bytes of inputs finished */
	struct timespec t0, last;
};

/* What every output of a run shares. */
struct pk_writer {
	const struct pk_opts *o;
	struct pk_pool *pool;
	struct pk_progress prog;
	int stop; /* an errno every later output would meet too: stop */
};

/* Once, before any output: the umask for new files, the interrupt handlers. */
void pk_output_init(void);

/*
 * pk_write() - compress @in into @out_path (NULL: standard output), and a
 * BGZF output's .gzi beside it. @ist: the input's stat when it is a file
 * whose owner, mode and times the output takes. Never over an existing
 * file unless pk_replacing(). Return: 0, or 1 after saying why; a full
 * disk, a read-only or an over-quota target also sets @w->stop.
 */
int pk_write(struct pk_writer *w, int in, const struct stat *ist, const char *in_name,
	     const char *out_path);

/* "; stopping, ..." if @err stops the run (and @w->stop = @err), else "". */
const char *pk_stop_note(struct pk_writer *w, int err);

/*
 * Outputs are written under a temporary name in the target directory and
 * renamed into place when complete; an interrupt (SIGINT, SIGTERM,
 * SIGHUP) removes the temporary files first.
 * @slot: 0 for the data file, 1 for its .gzi.
 */
BFS_MUST_CHECK int pk_tmp_open(int slot, const char *final, char **tmp);
/* fsync, close, rename onto @final; never over an existing file unless @force (-EEXIST). */
BFS_MUST_CHECK int pk_tmp_commit(int slot, int fd, char *tmp, const char *final, bool force);
/* Close and remove a temporary file that will not be used; NULL @tmp is a no-op. */
void pk_tmp_abort(int slot, int fd, char *tmp);
/* In-place append (--index): on interrupt, cut @fd back to @len. -1 clears. */
void pk_cleanup_truncate(int fd, uint64_t len);

void pk_progress_start(struct pk_progress *p, bool on);
/* Erase the progress line, if shown, before other output. */
void pk_progress_clear(void);

/* Messages: "blockfs-pack: " + text, to stderr. */
void pk_err(const char *fmt, ...) BFS_PRINTF(1, 2);

#endif
