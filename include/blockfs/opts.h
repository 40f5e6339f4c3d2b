/* SPDX-License-Identifier: MIT */
/*
 * Mount options (man 8 blockfs, OPTIONS): parsed from -o with fuse_opt,
 * then checked once by bfs_opts_check(), which turns strings into values
 * and refuses anything else with a message that names the option.
 */
#ifndef BLOCKFS_OPTS_H
#define BLOCKFS_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "blockfs/common.h"
#include "blockfs/vocab.h"

struct fuse_args;

/*
 * The kernel's page cache holds what readers read and what blockfs pushes
 * ahead; blockfs's own cache keeps only blocks in flight, blocks whose
 * edges straddle pages, and what random readers come back to.
 */
#define BFS_DEFAULT_CACHE_SIZE	     (32ull << 20)
#define BFS_DEFAULT_READAHEAD	     (8ull << 20)
/* The mount's bdi read_ahead_kb, as bytes (doc/decisions/0001-kernel-readahead.md) */
#define BFS_DEFAULT_KERNEL_READAHEAD (1ull << 20)
#define BFS_MIN_KERNEL_READAHEAD     (4ull << 10) /* a page; 0 means "the kernel's" */
#define BFS_MAX_KERNEL_READAHEAD     (1ull << 30)
#define BFS_MAX_WORKERS		     256
#define BFS_MAX_LIVE_MAPS	     1024 /* mappings kept at once; far below vm.max_map_count */
/*
 * How long the kernel trusts names (and absences) and attributes, seconds
 * (doc/decisions/0002-timeouts.md).
 */
#define BFS_DEFAULT_ENTRY_TIMEOUT    10.0
#define BFS_DEFAULT_ATTR_TIMEOUT     10.0
#define BFS_DEFAULT_NEGATIVE_TIMEOUT 0.0
/*
 * Bytes of index cache entries kept in the cache directory: the index of a
 * 10 GiB stock lz4 -B4 file is 3.75 MiB, a directory memo 24 bytes a file;
 * a 1 TiB stock lz4 -B4 file's index (384 MiB) still fits.
 */
#define BFS_DEFAULT_INDEX_CACHE_SIZE (1ull << 30)
/*
 * Bytes of decoded output of big zstd frames and xz blocks kept on disk
 * beside the index cache (spill.h): as much as that cache may hold, so a
 * default mount takes at most twice that there; a zstd or xz -T1 file of
 * up to 1 GiB decompressed is then decoded once instead of twice.
 */
#define BFS_DEFAULT_SPILL_SIZE	     (1ull << 30)
/* Inodes the daemon keeps before asking the kernel to forget directories (trim.c). */
#define BFS_DEFAULT_MAX_INODES	     131072u
#define BFS_MIN_MAX_INODES	     1024u /* fewer would forget what readers are in */
/* Entries of a listing's first READDIRPLUS reply given with attributes (ops.c). */
#define BFS_READDIRPLUS_ON	     SIZE_MAX
/* What the kernel's 64-bit seconds and libfuse take easily. */
#define BFS_MAX_TIMEOUT		     4294967295.0
/*
 * Microseconds the FUSE loop's reader polls before it sleeps (loop.c;
 * doc/decisions/0003-fuse-loop.md).
 */
#define BFS_DEFAULT_BUSY_POLL_US     1000u
#define BFS_MAX_BUSY_POLL_US	     1000000u

/* Options with values blockfs can take, at most (opts.c's table) */
#define BFS_OPTS_MAX 48

struct bfs_opts {
	char *source;	  /* first positional argument: the backing directory */
	char *mountpoint; /* second, as given (main.c resolves and checks it) */

	/*
	 * As given with -o, by row of opts.c's table (bfs_opts_given());
	 * NULL when absent. Owned; bfs_opts_release() frees.
	 */
	char *given[BFS_OPTS_MAX];

	/* Checked values. */
	enum bfs_readpath readpath;
	bool verify;
	uint64_t cache_size;	   /* bytes of decoded blocks kept; 0: none */
	uint64_t readahead;	   /* bytes decoded ahead of a sequential reader; 0: none */
	uint64_t kernel_readahead; /* the kernel's read-ahead on the mount; 0: its own */
	unsigned int workers;	   /* read-ahead threads */
	double entry_timeout;	   /* seconds the kernel trusts a name */
	double attr_timeout;	   /* seconds it trusts attributes */
	double negative_timeout;   /* seconds it trusts that a name is absent */
	int advice;		   /* enum bfs_advice for files without a hint */
	int populate;		   /* enum bfs_populate: pre-faulting mappings */
	bool willneed_kernel;	   /* willneed pushes decoded pages to the kernel's cache */
	int nonempty;		   /* -o nonempty: mount over a non-empty directory or a mount */
	int keep_compressed; /* -o keep_compressed: decoded files shown raw too, sidecars kept */
	int kernel_open;     /* -o kernel_open: the kernel opens files without asking */
	int suid, dev;	     /* -o suid, -o dev: asked for explicitly (else nosuid, nodev) */
	uint32_t max_read;   /* -o max_read: INIT must ask for it too; 0 when not given */
	const char *index_cache;   /* directory of kept indexes (as given); NULL: the
					   default place (bfs_icache_default_dir()) */
	bool index_cache_off;	   /* -o index_cache=off: none at all */
	uint64_t index_cache_size; /* bytes of entries kept there; 0: no bound */
	uint64_t spill_size;	   /* bytes of proven output spilled to disk; 0: no spill */
	bool gzip_index;	   /* plain gzip shown decoded (gzip=index), not unchanged */
	uint32_t gzip_span;	   /* bytes of output between gzip checkpoints */
	size_t max_inodes;  /* inodes kept before the kernel is asked to forget some; 0: no bound */
	size_t readdirplus; /* entries with attributes in a listing's first reply; 0: no
				   READDIRPLUS; BFS_READDIRPLUS_ON: as many as fit */
	bool libfuse_loop;  /* loop=libfuse: libfuse's session loops, not loop.c's */
	unsigned int busy_poll_us; /* the reader polls /dev/fuse this long before it sleeps */
	bool readdirplus_auto;	   /* readdirplus=auto: BFS_READDIRPLUS_ON or names alone, by
				   what the entries listed are used for (ops.c) */
};

/**
 * bfs_opts_parse() - take blockfs's options, SOURCE and MOUNTPOINT out of @args.
 * Leaves every FUSE option (and any third positional argument) in @args.
 * Sets defaults first, then checks. On failure prints why to stderr.
 * Return: 0, or -1 (the caller exits with status 1).
 */
BFS_MUST_CHECK int bfs_opts_parse(struct fuse_args *args, struct bfs_opts *o);

/*
 * Check the strings in @o: every option's default, or its given value
 * checked. On failure write a one-line reason to @err.
 */
BFS_MUST_CHECK int bfs_opts_check(struct bfs_opts *o, char *err, size_t errlen);
/* What -o @name=VALUE gave (before bfs_opts_check() read it), or NULL. */
const char *bfs_opts_given(const struct bfs_opts *o, const char *name);
/* Give @value to option @name as -o would (a copy). Return: 0, -EINVAL (no such option), -ENOMEM. */
BFS_MUST_CHECK int bfs_opts_give(struct bfs_opts *o, const char *name, const char *value);
void bfs_opts_release(struct bfs_opts *o);
/* One line per blockfs option, in man page order. */
void bfs_opts_help(FILE *out);

#endif
