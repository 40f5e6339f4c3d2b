// SPDX-License-Identifier: MIT
/*
 * The -o table, the checks, and --help. Every value is checked before
 * anything is mounted, and a bad one is refused naming the option and the
 * values it takes, rather than ignored: a user who asks for mmap must not
 * get pread and believe the numbers.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "blockfs/codec.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"
#include "blockfs/vocab.h"

#define BFS_OPT(t, f) { t, offsetof(struct bfs_opts, f), 0 }

/* FUSE options blockfs must also know; opt_proc() keeps them for libfuse. */
enum { KEY_MAX_READ = 1 };

static const struct fuse_opt bfs_opt_spec[] = {
	BFS_OPT("readpath=%s", readpath_s),
	BFS_OPT("populate=%s", populate_s),
	BFS_OPT("advice=%s", advice_s),
	BFS_OPT("cache_size=%s", cache_size_s),
	BFS_OPT("readahead=%s", readahead_s),
	BFS_OPT("workers=%s", workers_s),
	BFS_OPT("verify=%s", verify_s),
	BFS_OPT("willneed=%s", willneed_s),
	BFS_OPT("kernel_readahead=%s", kernel_readahead_s),
	BFS_OPT("index_cache=%s", index_cache_s),
	BFS_OPT("index_cache_size=%s", index_cache_size_s),
	BFS_OPT("spill_size=%s", spill_size_s),
	BFS_OPT("gzip=%s", gzip_s),
	BFS_OPT("gzip_span=%s", gzip_span_s),
	BFS_OPT("max_inodes=%s", max_inodes_s),
	BFS_OPT("readdirplus=%s", readdirplus_s),
	BFS_OPT("loop=%s", loop_s),
	BFS_OPT("busy_poll=%s", busy_poll_s),
	BFS_OPT("entry_timeout=%s", entry_timeout_s),
	BFS_OPT("attr_timeout=%s", attr_timeout_s),
	BFS_OPT("negative_timeout=%s", negative_timeout_s),
	{ "nonempty", offsetof(struct bfs_opts, nonempty), 1 },	/* libfuse 3 dropped it */
	{ "keep_compressed", offsetof(struct bfs_opts, keep_compressed), 1 },
	{ "kernel_open", offsetof(struct bfs_opts, kernel_open), 1 },
	/* Taken here, so that only an explicit ask reaches libfuse (main.c); the last one wins. */
	{ "suid", offsetof(struct bfs_opts, suid), 1 },
	{ "nosuid", offsetof(struct bfs_opts, suid), 0 },
	{ "dev", offsetof(struct bfs_opts, dev), 1 },
	{ "nodev", offsetof(struct bfs_opts, dev), 0 },
	FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
	FUSE_OPT_END
};

static const struct {
	const char *name, *values, *help;
} helps[] = {
	{ "readpath", "pread|mmap|auto", "how compressed bytes are read (pread)" },
	{ "populate", "off|on|async", "mmap path: pre-fault the mapping (off)" },
	{ "advice", "normal|sequential|random|willneed|noreuse", "default access hint (normal)" },
	{ "cache_size", "SIZE", "decompressed blocks kept in memory; 0: none (32M)" },
	{ "readahead", "SIZE", "how far ahead to decompress a sequential stream (8M)" },
	{ "workers", "N", "threads that decompress ahead; 0: none (online CPUs)" },
	{ "verify", "on|off", "check per-block checksums the files carry (on)" },
	{ "willneed", "kernel|cache", "where willneed puts decoded bytes: the kernel's page "
				      "cache or blockfs's cache (kernel)" },
	{ "kernel_readahead", "SIZE", "the kernel's read-ahead into the mount (its bdi "
				      "read_ahead_kb); 0: leave it (1M)" },
	{ "entry_timeout", "SECONDS", "how long the kernel trusts a name; an open always "
				     "checks (10)" },
	{ "attr_timeout", "SECONDS", "how long the kernel trusts attributes (10)" },
	{ "negative_timeout", "SECONDS", "how long the kernel trusts that a name is absent "
					"(0: a new file shows at once)" },
	{ "max_inodes", "N", "files and directories remembered before the kernel is asked to "
			     "forget the oldest directories; 0: no bound (131072)" },
	{ "readdirplus", "auto|on|off|N", "attributes with the names: for a listing's first "
					  "reply and once its entries are looked up (on); never "
					  "(off); as on, with at most N entries in the first "
					  "reply; as on while the files listed are opened or "
					  "looked up, else names alone (auto)" },
	{ "loop", "blockfs|libfuse", "how requests are read: one thread at a time, which "
				     "answers quick ones itself, or libfuse's loop (blockfs)" },
	{ "busy_poll", "USEC", "loop=blockfs: how long the reader polls for the next request "
			       "before it sleeps; 0: never (50)" },
	{ "keep_compressed", NULL, "also show each decoded file's compressed file, with its "
				   "index sidecars (.gzi .tbi .csi .fai), for tabix and samtools" },
	{ "kernel_open", NULL, "for a SOURCE that does not change while mounted: the kernel "
			       "opens files without asking blockfs, which no longer checks "
			       "the backing file at each open" },
	{ "index_cache", "DIR|off", "keep the block indexes of walked files, and what "
				    "listings learned, in DIR across mounts "
				    "($XDG_CACHE_HOME/blockfs or ~/.cache/blockfs)" },
	{ "index_cache_size", "SIZE", "bytes of entries kept there before the least "
				      "recently used are dropped; 0: no bound (1G)" },
	{ "spill_size", "SIZE", "decoded bytes of big zstd frames and xz blocks kept on disk "
				"in the index_cache directory once their checksum is proven, "
				"so they are decoded once; 0: none (1G)" },
	{ "gzip", "index|raw", "plain gzip files: decoded through a checkpoint index "
			       "made at first use, or shown unchanged (index)" },
	{ "gzip_span", "SIZE", "gzip=index: output between checkpoints, 64K to 32M (1M)" },
	{ "nonempty", NULL, "mount over a non-empty directory or a mount point" },
	{ "suid", NULL, "honour set-user-ID bits below SOURCE (root only; default nosuid)" },
	{ "dev", NULL, "open device files below SOURCE (root only; default nodev)" },
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct bfs_opts *o = data;
	char **slot;

	(void)out;
	if (key == KEY_MAX_READ) {
		/*
		 * libfuse passes max_read to the kernel, then fails INIT unless
		 * the init op asked for the same (ops.c): in the background, after
		 * the daemon has detached, with nothing mounted and exit status 0.
		 */
		free(o->max_read_s);
		o->max_read_s = strdup(arg + strlen("max_read="));
		return o->max_read_s ? 1 : -1;	/* and keep it for libfuse */
	}
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;		/* keep: -f, -o allow_other, ... */
	if (o->source && o->mountpoint) {
		fprintf(stderr, "blockfs: unexpected argument '%s' after SOURCE and MOUNTPOINT\n",
			arg);
		return -1;
	}
	/*
	 * Both positional arguments are taken here: fuse_parse_cmdline() would
	 * resolve the mount point, and fail on it, before libfuse has looked
	 * at a single option; main.c checks options first.
	 */
	slot = o->source ? &o->mountpoint : &o->source;
	*slot = strdup(arg);
	return *slot ? 0 : -1;
}

int bfs_opts_parse(struct fuse_args *args, struct bfs_opts *o)
{
	char err[256];

	memset(o, 0, sizeof(*o));
	if (fuse_opt_parse(args, o, bfs_opt_spec, opt_proc) < 0)
		return -1;		/* fuse_opt printed why */
	if (bfs_opts_check(o, err, sizeof(err)) < 0) {
		fprintf(stderr, "blockfs: %s\n", err);
		return -1;
	}
	/* Accepted, since a hint may still choose mmap per file; but say so. */
	if (o->populate_s && o->populate != BFS_POPULATE_OFF && o->readpath == BFS_READPATH_PREAD)
		fprintf(stderr, "blockfs: warning: populate=%s has no effect with readpath=pread: "
			"only files whose user.blockfs.readpath hint says mmap or auto are mapped\n",
			o->populate_s);
	return 0;
}

/*
 * -o @opt=@s, one of the NULL-terminated @names: its index in *@out, or
 * -EINVAL with @err naming the option and the values it takes.
 */
static int pick(const char *opt, const char *s, const char *const *names, int *out, char *err,
		size_t errlen)
{
	size_t at;
	int i = bfs_pick(s, names, SIZE_MAX);

	if (i >= 0) {
		*out = i;
		return 0;
	}
	for (i = 0; names[i]; i++)
		;
	at = (size_t)snprintf(err, errlen, "bad value '%s' for option %s: expected", s, opt);
	for (int k = 0; k < i && at < errlen; k++)
		at += (size_t)snprintf(err + at, errlen - at, "%s %s", k == 0 ? "" :
				       k == i - 1 ? " or" : ",", names[k]);
	return -EINVAL;
}

/* -o @opt=@s seconds: a decimal number from 0 to BFS_MAX_TIMEOUT into *@out. */
/* A count in decimal digits alone (no sign, space or suffix), at most @max. */
static int count(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return *s >= '0' && *s <= '9' && !*end && !errno && *out <= max ? 0 : -1;
}

static int seconds(const char *opt, const char *s, double *out, char *err, size_t errlen)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	/* strtod takes "inf", "nan", hex and leading blanks: only digits and one point here */
	if (!*s || s[strspn(s, "0123456789.")] || end == s || *end || errno || !(v >= 0) ||
	    v > BFS_MAX_TIMEOUT) {
		snprintf(err, errlen, "bad value '%s' for option %s: expected seconds from 0 to "
			 "%.0f, such as 0, 0.5, 1 or 3600", s, opt, BFS_MAX_TIMEOUT);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int bfs_opts_check(struct bfs_opts *o, char *err, size_t errlen)
{
	static const char *const onoff[] = { "off", "on", NULL };
	static const char *const populates[] = { "off", "on", "async", NULL };	/* enum bfs_populate */
	static const char *const willneeds[] = { "cache", "kernel", NULL };
	static const char *const gzips[] = { "index", "raw", NULL };
	struct bfs_advice_req adv;
	enum bfs_readpath rp;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long n;
	int v;

	o->readpath = BFS_READPATH_PREAD;
	o->verify = true;
	o->cache_size = BFS_DEFAULT_CACHE_SIZE;
	o->readahead = BFS_DEFAULT_READAHEAD;
	o->workers = cpus > 0 ? (unsigned int)cpus : 1;
	o->advice = BFS_ADV_NORMAL;
	o->willneed_kernel = true;	/* twice as fast after willneed: see README */
	o->entry_timeout = BFS_DEFAULT_ENTRY_TIMEOUT;
	o->attr_timeout = BFS_DEFAULT_ATTR_TIMEOUT;
	o->negative_timeout = BFS_DEFAULT_NEGATIVE_TIMEOUT;
	if (o->entry_timeout_s &&
	    seconds("entry_timeout", o->entry_timeout_s, &o->entry_timeout, err, errlen) < 0)
		return -EINVAL;
	if (o->attr_timeout_s &&
	    seconds("attr_timeout", o->attr_timeout_s, &o->attr_timeout, err, errlen) < 0)
		return -EINVAL;
	if (o->negative_timeout_s &&
	    seconds("negative_timeout", o->negative_timeout_s, &o->negative_timeout, err,
		    errlen) < 0)
		return -EINVAL;
	if (o->readahead_s && bfs_parse_size(o->readahead_s, &o->readahead) < 0) {
		snprintf(err, errlen, "bad value '%s' for option readahead: expected a size such "
			 "as 0, 512K, 8M", o->readahead_s);
		return -EINVAL;
	}
	o->kernel_readahead = BFS_DEFAULT_KERNEL_READAHEAD;
	if (o->kernel_readahead_s &&
	    (bfs_parse_size(o->kernel_readahead_s, &o->kernel_readahead) < 0 ||
	     o->kernel_readahead > BFS_MAX_KERNEL_READAHEAD ||
	     (o->kernel_readahead > 0 && o->kernel_readahead < BFS_MIN_KERNEL_READAHEAD))) {
		/* Below a page the kernel would read ahead nothing at all, not "a little". */
		snprintf(err, errlen, "bad value '%s' for option kernel_readahead: expected 0 or "
			 "a size from 4K to 1G such as 128K, 1M", o->kernel_readahead_s);
		return -EINVAL;
	}
	if (o->workers_s) {
		if (count(o->workers_s, BFS_MAX_WORKERS, &n) < 0) {
			snprintf(err, errlen, "bad value '%s' for option workers: expected a count "
				 "from 0 to %d", o->workers_s, BFS_MAX_WORKERS);
			return -EINVAL;
		}
		o->workers = (unsigned int)n;
	}
	o->max_inodes = BFS_DEFAULT_MAX_INODES;
	if (o->max_inodes_s) {
		if (count(o->max_inodes_s, UINT32_MAX, &n) < 0 ||
		    (n > 0 && n < BFS_MIN_MAX_INODES)) {
			snprintf(err, errlen, "bad value '%s' for option max_inodes: expected 0 or a "
				 "count from %u to 4294967295", o->max_inodes_s, BFS_MIN_MAX_INODES);
			return -EINVAL;
		}
		o->max_inodes = (size_t)n;
	}
	o->readdirplus = BFS_READDIRPLUS_ON;
	o->readdirplus_auto = !o->readdirplus_s || strcmp(o->readdirplus_s, "auto") == 0;
	if (o->readdirplus_auto) {
		/* the default */
	} else if (strcmp(o->readdirplus_s, "on") == 0) {
		o->readdirplus = BFS_READDIRPLUS_ON;
	} else if (strcmp(o->readdirplus_s, "off") == 0) {
		o->readdirplus = 0;
	} else {
		if (count(o->readdirplus_s, UINT32_MAX, &n) < 0 || n == 0) {
			snprintf(err, errlen, "bad value '%s' for option readdirplus: expected auto, "
				 "on, off or a count from 1 to 4294967295", o->readdirplus_s);
			return -EINVAL;
		}
		o->readdirplus = (size_t)n;
	}
	if (o->loop_s) {
		static const char *const loops[] = { "blockfs", "libfuse", NULL };

		if (pick("loop", o->loop_s, loops, &v, err, errlen) < 0)
			return -EINVAL;
		o->libfuse_loop = v == 1;
	}
	o->busy_poll_us = BFS_DEFAULT_BUSY_POLL_US;
	if (o->busy_poll_s) {
		if (count(o->busy_poll_s, BFS_MAX_BUSY_POLL_US, &n) < 0) {
			snprintf(err, errlen, "bad value '%s' for option busy_poll: expected "
				 "microseconds from 0 to %u", o->busy_poll_s, BFS_MAX_BUSY_POLL_US);
			return -EINVAL;
		}
		o->busy_poll_us = (unsigned int)n;
	}
	/* The names are the hints' (hints.c); dontneed acts on ranges and is no default. */
	if (o->advice_s) {
		if (bfs_advice_parse(o->advice_s, strlen(o->advice_s), &adv) < 0 || adv.ranged ||
		    adv.advice == BFS_ADV_DONTNEED) {
			snprintf(err, errlen, "bad value '%s' for option advice: expected normal, "
				 "sequential, random, willneed or noreuse", o->advice_s);
			return -EINVAL;
		}
		o->advice = adv.advice;
	}
	if (o->cache_size_s && bfs_parse_size(o->cache_size_s, &o->cache_size) < 0) {
		snprintf(err, errlen, "bad value '%s' for option cache_size: expected a size such "
			 "as 0, 65536, 64K, 256M or 1G", o->cache_size_s);
		return -EINVAL;
	}
	if (o->readpath_s) {
		if (bfs_readpath_parse(o->readpath_s, strlen(o->readpath_s), &rp) < 0) {
			snprintf(err, errlen, "bad value '%s' for option readpath: expected pread, "
				 "mmap or auto", o->readpath_s);
			return -EINVAL;
		}
		o->readpath = rp;
	}
	if (o->populate_s) {
		if (pick("populate", o->populate_s, populates, &v, err, errlen) < 0)
			return -EINVAL;
		o->populate = v;
	}
	if (o->willneed_s) {
		if (pick("willneed", o->willneed_s, willneeds, &v, err, errlen) < 0)
			return -EINVAL;
		o->willneed_kernel = v == 1;
	}
	if (o->verify_s) {
		if (pick("verify", o->verify_s, onoff, &v, err, errlen) < 0)
			return -EINVAL;
		o->verify = v;
	}
	if (o->max_read_s) {
		/* What the kernel's mount option takes: decimal, 32 bits, no suffix. */
		if (count(o->max_read_s, UINT32_MAX, &n) < 0) {
			snprintf(err, errlen, "bad value '%s' for option max_read: expected a byte "
				 "count in decimal, such as 131072", o->max_read_s);
			return -EINVAL;
		}
		o->max_read = (uint32_t)n;
	}
	o->gzip_index = true;
	if (o->gzip_s) {
		if (pick("gzip", o->gzip_s, gzips, &v, err, errlen) < 0)
			return -EINVAL;
		o->gzip_index = v == 0;
	}
	o->gzip_span = BFS_GZIP_SPAN_DEFAULT;
	if (o->gzip_span_s) {
		uint64_t span;

		if (bfs_parse_size(o->gzip_span_s, &span) < 0 || span < BFS_GZIP_SPAN_MIN ||
		    span > BFS_GZIP_SPAN_MAX) {
			snprintf(err, errlen, "bad value '%s' for option gzip_span: expected a size "
				 "from 64K to 32M such as 1M", o->gzip_span_s);
			return -EINVAL;
		}
		o->gzip_span = (uint32_t)span;
	}
	o->index_cache = NULL;
	o->index_cache_off = false;
	if (o->index_cache_s) {
		if (!*o->index_cache_s) {
			snprintf(err, errlen, "bad value '' for option index_cache: expected a "
				 "directory or off");
			return -EINVAL;
		}
		/* A directory called off is ./off. */
		o->index_cache_off = strcmp(o->index_cache_s, "off") == 0;
		if (!o->index_cache_off)
			o->index_cache = o->index_cache_s;	/* opened, and checked, by main() */
	}
	o->index_cache_size = BFS_DEFAULT_INDEX_CACHE_SIZE;
	if (o->index_cache_size_s &&
	    bfs_parse_size(o->index_cache_size_s, &o->index_cache_size) < 0) {
		snprintf(err, errlen, "bad value '%s' for option index_cache_size: expected a "
			 "size such as 0, 64M or 1G", o->index_cache_size_s);
		return -EINVAL;
	}
	o->spill_size = BFS_DEFAULT_SPILL_SIZE;
	if (o->spill_size_s && bfs_parse_size(o->spill_size_s, &o->spill_size) < 0) {
		snprintf(err, errlen, "bad value '%s' for option spill_size: expected a size "
			 "such as 0, 256M or 4G", o->spill_size_s);
		return -EINVAL;
	}
	return 0;
}

void bfs_opts_release(struct bfs_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->readpath_s);
	free(o->verify_s);
	free(o->populate_s);
	free(o->advice_s);
	free(o->cache_size_s);
	free(o->readahead_s);
	free(o->workers_s);
	free(o->max_inodes_s);
	free(o->willneed_s);
	free(o->kernel_readahead_s);
	free(o->max_read_s);
	free(o->index_cache_s);
	free(o->index_cache_size_s);
	free(o->spill_size_s);
	free(o->gzip_s);
	free(o->gzip_span_s);
	free(o->entry_timeout_s);
	free(o->attr_timeout_s);
	free(o->negative_timeout_s);
	free(o->readdirplus_s);
	free(o->loop_s);
	free(o->busy_poll_s);
	memset(o, 0, sizeof(*o));
}

/* Where the help texts start, and the width they wrap at: as fuse_cmdline_help() does. */
#define HELP_COL 27
#define HELP_WIDTH 79

void bfs_opts_help(FILE *out)
{
	fprintf(out, "blockfs options:\n");
	for (size_t i = 0; i < BFS_ARRAY_SIZE(helps); i++) {
		const char *h = helps[i].help;
		int col;

		if (helps[i].values)
			col = fprintf(out, "    -o %s=%s", helps[i].name, helps[i].values);
		else
			col = fprintf(out, "    -o %s", helps[i].name);
		/* A long left side gets its text on the next line, all texts in one column. */
		while (*h) {
			size_t n = strlen(h);

			if (col >= HELP_COL) {
				fputc('\n', out);
				col = 0;
			}
			if (n > HELP_WIDTH - HELP_COL) {	/* wrap at the last space that fits */
				n = HELP_WIDTH - HELP_COL;
				while (n > 0 && h[n] != ' ')
					n--;
				if (n == 0)
					n = strcspn(h, " ");
			}
			fprintf(out, "%*s%.*s\n", HELP_COL - col, "", (int)n, h);
			col = 0;
			h += n;
			h += *h == ' ';
		}
	}
}
