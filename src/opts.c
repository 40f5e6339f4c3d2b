// SPDX-License-Identifier: MIT
/*
 * The -o table, the checks, and --help, all from one table of options
 * (rows[]). Every value is checked before
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

/*
 * The table. A row is one -o option: its name, what --help says of it,
 * the kind of value it takes, where the checked value goes in struct
 * bfs_opts, its default and bounds. Parsing, the checks, the defaults and
 * --help all read it; blockfs(8) documents every row that has help
 * (tests/integration/docs.sh checks both ways).
 */
enum kind {
	FLAG,	 /* a word alone: sets an int field to .def */
	SIZE,	 /* bfs_parse_size(): "0", "64K", "1G"; uint64_t or uint32_t */
	COUNT,	 /* decimal digits only; uint64_t/size_t, unsigned int or uint32_t */
	SECONDS, /* a decimal number from 0 to BFS_MAX_TIMEOUT; double */
	PICK,	 /* one of .names: its index (or .map's value) into an int or bool */
	CUSTOM,	 /* .check() reads it */
};

struct row {
	const char *name;
	const char *values; /* --help's word for the value; NULL for a flag */
	const char *help;   /* NULL: not listed (the negations, FUSE's own) */
	enum kind kind;
	size_t at, width;  /* the checked value: offset and size in struct bfs_opts */
	uint64_t def;	   /* the default (SECONDS: whole seconds; FLAG: the value set) */
	uint64_t min, max; /* SIZE, COUNT: bounds; 0 also taken when .zero_ok */
	bool zero_ok;
	const char *const *names; /* PICK: the values, NULL-ended */
	const int *map;		  /* PICK: what each name stores; NULL: its index */
	const char *expect; /* what the refusal says is expected; NULL: made from the bounds */
	const char *unit;   /* COUNT: the thing counted, for that message ("a count") */
	/* CUSTOM: set the default, then read @s if given (NULL if not); 0 or -EINVAL */
	int (*check)(struct bfs_opts *o, const char *s);
};

#define AT(f) .at = offsetof(struct bfs_opts, f), .width = sizeof(((struct bfs_opts *)0)->f)

static const char *const onoff[] = { "off", "on", NULL };
static const char *const populates[] = { "off", "on", "async", NULL }; /* enum bfs_populate */
static const char *const willneeds[] = { "cache", "kernel", NULL };
static const char *const gzips[] = { "index", "raw", NULL };
static const int gzip_index[] = { 1, 0 };
static const char *const loops[] = { "blockfs", "libfuse", NULL };

static int check_readpath(struct bfs_opts *o, const char *s);
static int check_advice(struct bfs_opts *o, const char *s);
static int check_workers(struct bfs_opts *o, const char *s);
static int check_readdirplus(struct bfs_opts *o, const char *s);
static int check_index_cache(struct bfs_opts *o, const char *s);

static const struct row rows[] = {
	{ "readpath", "pread|mmap|auto", "how compressed bytes are read (pread)", .kind = CUSTOM,
	  AT(readpath), .expect = "pread, mmap or auto", .check = check_readpath },
	{ "populate", "off|on|async", "mmap path: pre-fault the mapping (off)", .kind = PICK,
	  AT(populate), .def = BFS_POPULATE_OFF, .names = populates },
	{ "advice", "normal|sequential|random|willneed|noreuse", "default access hint (normal)",
	  .kind = CUSTOM, AT(advice), .expect = "normal, sequential, random, willneed or noreuse",
	  .check = check_advice },
	{ "cache_size", "SIZE", "decompressed blocks kept in memory; 0: none (32M)", .kind = SIZE,
	  AT(cache_size), .def = BFS_DEFAULT_CACHE_SIZE, .max = UINT64_MAX,
	  .expect = "a size such as 0, 65536, 64K, 256M or 1G" },
	{ "readahead", "SIZE", "how far ahead to decompress a sequential stream (8M)", .kind = SIZE,
	  AT(readahead), .def = BFS_DEFAULT_READAHEAD, .max = UINT64_MAX,
	  .expect = "a size such as 0, 512K, 8M" },
	{ "workers", "N", "threads that decompress ahead; 0: none (online CPUs)", .kind = CUSTOM,
	  AT(workers), .max = BFS_MAX_WORKERS, .check = check_workers },
	{ "verify", "on|off", "check per-block checksums the files carry (on)", .kind = PICK,
	  AT(verify), .def = 1, .names = onoff },
	{ "willneed", "kernel|cache",
	  "where willneed puts decoded bytes: the kernel's page "
	  "cache or blockfs's cache (kernel)",
	  .kind = PICK, AT(willneed_kernel), .def = 1, .names = willneeds },
	/* below a page the kernel would read ahead nothing at all, not "a little" */
	{ "kernel_readahead", "SIZE",
	  "the kernel's read-ahead into the mount (its bdi "
	  "read_ahead_kb); 0: leave it (1M)",
	  .kind = SIZE, AT(kernel_readahead), .def = BFS_DEFAULT_KERNEL_READAHEAD,
	  .min = BFS_MIN_KERNEL_READAHEAD, .max = BFS_MAX_KERNEL_READAHEAD, .zero_ok = true,
	  .expect = "0 or a size from 4K to 1G such as 128K, 1M" },
	{ "entry_timeout", "SECONDS",
	  "how long the kernel trusts a name; an open always "
	  "checks (10)",
	  .kind = SECONDS, AT(entry_timeout), .def = BFS_DEFAULT_ENTRY_TIMEOUT },
	{ "attr_timeout", "SECONDS", "how long the kernel trusts attributes (10)", .kind = SECONDS,
	  AT(attr_timeout), .def = BFS_DEFAULT_ATTR_TIMEOUT },
	{ "negative_timeout", "SECONDS",
	  "how long the kernel trusts that a name is absent "
	  "(0: a new file shows at once)",
	  .kind = SECONDS, AT(negative_timeout), .def = BFS_DEFAULT_NEGATIVE_TIMEOUT },
	{ "max_inodes", "N",
	  "files and directories remembered before the kernel is asked to "
	  "forget the oldest directories; 0: no bound (131072)",
	  .kind = COUNT, AT(max_inodes), .def = BFS_DEFAULT_MAX_INODES, .min = BFS_MIN_MAX_INODES,
	  .max = UINT32_MAX, .zero_ok = true },
	{ "readdirplus", "auto|on|off|N",
	  "attributes with the names: for a listing's first "
	  "reply and once its entries are looked up (on); never "
	  "(off); as on, with at most N entries in the first "
	  "reply; as on while the files listed are opened or "
	  "looked up, else names alone (auto)",
	  .kind = CUSTOM, AT(readdirplus),
	  .expect = "auto, on, off or a count from 1 to 4294967295", .check = check_readdirplus },
	{ "loop", "blockfs|libfuse",
	  "how requests are read: one thread at a time, which "
	  "answers quick ones itself, or libfuse's loop (blockfs)",
	  .kind = PICK, AT(libfuse_loop), .def = 0, .names = loops },
	{ "busy_poll", "USEC",
	  "loop=blockfs: the longest the reader polls for the next "
	  "request before it sleeps (it adapts below); 0: never (1000)",
	  .kind = COUNT, AT(busy_poll_us), .def = BFS_DEFAULT_BUSY_POLL_US,
	  .max = BFS_MAX_BUSY_POLL_US, .unit = "microseconds" },
	{ "keep_compressed", NULL,
	  "also show each decoded file's compressed file, with its "
	  "index sidecars (.gzi .tbi .csi .fai), for tabix and samtools",
	  .kind = FLAG, AT(keep_compressed), .def = 1 },
	{ "kernel_open", NULL,
	  "for a SOURCE that does not change while mounted: the kernel "
	  "opens files without asking blockfs, which no longer checks "
	  "the backing file at each open",
	  .kind = FLAG, AT(kernel_open), .def = 1 },
	{ "index_cache", "DIR|off",
	  "keep the block indexes of walked files, and what "
	  "listings learned, in DIR across mounts "
	  "($XDG_CACHE_HOME/blockfs or ~/.cache/blockfs)",
	  .kind = CUSTOM, AT(index_cache), .expect = "a directory or off",
	  .check = check_index_cache },
	{ "index_cache_size", "SIZE",
	  "bytes of entries kept there before the least "
	  "recently used are dropped; 0: no bound (1G)",
	  .kind = SIZE, AT(index_cache_size), .def = BFS_DEFAULT_INDEX_CACHE_SIZE,
	  .max = UINT64_MAX, .expect = "a size such as 0, 64M or 1G" },
	{ "spill_size", "SIZE",
	  "decoded bytes of big zstd frames and xz blocks, and of what "
	  "a first stat decodes (bzip2, pzstd), kept on disk in the "
	  "index_cache directory once proven, so they are decoded once; "
	  "0: none (1G)",
	  .kind = SIZE, AT(spill_size), .def = BFS_DEFAULT_SPILL_SIZE, .max = UINT64_MAX,
	  .expect = "a size such as 0, 256M or 4G" },
	{ "gzip", "index|raw",
	  "plain gzip files: decoded through a checkpoint index "
	  "made at first use, or shown unchanged (index)",
	  .kind = PICK, AT(gzip_index), .def = 1, .names = gzips, .map = gzip_index },
	{ "gzip_span", "SIZE", "gzip=index: output between checkpoints, 64K to 32M (1M)",
	  .kind = SIZE, AT(gzip_span), .def = BFS_GZIP_SPAN_DEFAULT, .min = BFS_GZIP_SPAN_MIN,
	  .max = BFS_GZIP_SPAN_MAX, .expect = "a size from 64K to 32M such as 1M" },
	/* libfuse 3 dropped it */
	{ "nonempty", NULL, "mount over a non-empty directory or a mount point", .kind = FLAG,
	  AT(nonempty), .def = 1 },
	/* Taken here, so that only an explicit ask reaches libfuse (mount_helper.c); the last one wins. */
	{ "suid", NULL, "honour set-user-ID bits below SOURCE (root only; default nosuid)",
	  .kind = FLAG, AT(suid), .def = 1 },
	{ "dev", NULL, "open device files below SOURCE (root only; default nodev)", .kind = FLAG,
	  AT(dev), .def = 1 },
	{ "nosuid", NULL, NULL, .kind = FLAG, AT(suid), .def = 0 },
	{ "nodev", NULL, NULL, .kind = FLAG, AT(dev), .def = 0 },
	/* A FUSE option: libfuse passes it to the kernel, and INIT must ask for the same (ops.c). */
	{ "max_read", "N", NULL, .kind = COUNT, AT(max_read), .max = UINT32_MAX,
	  .expect = "a byte count in decimal, such as 131072" },
};

#define ROWS BFS_ARRAY_SIZE(rows)
_Static_assert(BFS_ARRAY_SIZE(rows) <= BFS_OPTS_MAX, "struct bfs_opts: given[] too small");

/* The row of option @name, or -1. */
static int row_of(const char *name)
{
	for (size_t i = 0; i < ROWS; i++)
		if (strcmp(rows[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* FUSE options blockfs must also know: opt_proc() keeps them for libfuse. */
static bool for_libfuse(const struct row *r)
{
	return strcmp(r->name, "max_read") == 0;
}

const char *bfs_opts_given(const struct bfs_opts *o, const char *name)
{
	int i = row_of(name);

	return i < 0 ? NULL : o->given[i];
}

int bfs_opts_give(struct bfs_opts *o, const char *name, const char *value)
{
	int i = row_of(name);
	char *v;

	if (i < 0 || rows[i].kind == FLAG)
		return -EINVAL;
	v = strdup(value);
	if (!v)
		return -ENOMEM;
	free(o->given[i]);
	o->given[i] = v;
	return 0;
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct bfs_opts *o = data;
	char **slot;

	(void)out;
	if (key >= 0 && (size_t)key < ROWS) {
		/* a FUSE option blockfs must know too: taken, and kept for libfuse */
		const char *eq = strchr(arg, '=');

		return bfs_opts_give(o, rows[key].name, eq ? eq + 1 : "") < 0 ? -1 : 1;
	}
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1; /* keep: -f, -o allow_other, ... */
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

#define TEMPL_MAX 40 /* "name=%s" of the longest name */

int bfs_opts_parse(struct fuse_args *args, struct bfs_opts *o)
{
	char templ[ROWS][TEMPL_MAX], err[256];
	struct fuse_opt spec[ROWS + 1];
	const char *populate;

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < ROWS; i++) {
		const struct row *r = &rows[i];

		if (r->kind == FLAG) {
			spec[i] = (struct fuse_opt){ r->name, r->at, (int)r->def };
		} else if (for_libfuse(r)) {
			snprintf(templ[i], TEMPL_MAX, "%s=", r->name);
			spec[i] = (struct fuse_opt)FUSE_OPT_KEY(templ[i], (int)i);
		} else {
			snprintf(templ[i], TEMPL_MAX, "%s=%%s", r->name);
			spec[i] = (struct fuse_opt){ templ[i],
						     offsetof(struct bfs_opts, given) +
							     i * sizeof(o->given[0]),
						     0 };
		}
	}
	spec[ROWS] = (struct fuse_opt)FUSE_OPT_END;
	if (fuse_opt_parse(args, o, spec, opt_proc) < 0)
		return -1; /* fuse_opt printed why */
	if (bfs_opts_check(o, err, sizeof(err)) < 0) {
		fprintf(stderr, "blockfs: %s\n", err);
		return -1;
	}
	/* Accepted, since a hint may still choose mmap per file; but say so. */
	populate = bfs_opts_given(o, "populate");
	if (populate && o->populate != BFS_POPULATE_OFF && o->readpath == BFS_READPATH_PREAD)
		fprintf(stderr,
			"blockfs: warning: populate=%s has no effect with readpath=pread: "
			"only files whose user.blockfs.readpath hint says mmap or auto are mapped\n",
			populate);
	return 0;
}

/* --- values --------------------------------------------------------------------- */

/* Store @v in @r's field of @o, whatever its width. */
static void put(struct bfs_opts *o, const struct row *r, uint64_t v)
{
	char *at = (char *)o + r->at;

	switch (r->width) {
	case sizeof(uint8_t): {
		bool b = v != 0; /* the fields this wide are bools */

		memcpy(at, &b, sizeof(b));
		break;
	}
	case sizeof(uint32_t): {
		uint32_t u = (uint32_t)v; /* int, unsigned int, uint32_t: checked to fit */

		memcpy(at, &u, sizeof(u));
		break;
	}
	default:
		memcpy(at, &v, sizeof(v));
		break;
	}
}

static void put_double(struct bfs_opts *o, const struct row *r, double v)
{
	memcpy((char *)o + r->at, &v, sizeof(v));
}

/* A count in decimal digits alone (no sign, space or suffix), at most @max. */
static int count(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	*out = v;
	return *s >= '0' && *s <= '9' && !*end && !errno && v <= max ? 0 : -1;
}

static int seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	/* strtod takes "inf", "nan", hex and leading blanks: only digits and one point here */
	if (!*s || s[strspn(s, "0123456789.")] || end == s || *end || errno || !(v >= 0) ||
	    v > BFS_MAX_TIMEOUT)
		return -1;
	*out = v;
	return 0;
}

/* @r's refusal of @s: what it expected, in @err. */
static int refuse(const struct row *r, const char *s, char *err, size_t errlen)
{
	size_t at = (size_t)snprintf(err, errlen, "bad value '%s' for option %s: expected ", s,
				     r->name);

	if (at >= errlen)
		return -EINVAL;
	if (r->expect) {
		snprintf(err + at, errlen - at, "%s", r->expect);
	} else if (r->kind == PICK) {
		size_t n = 0;

		while (r->names[n])
			n++;
		for (size_t k = 0; k < n && at < errlen; k++)
			at += (size_t)snprintf(err + at, errlen - at, "%s%s",
					       k == 0	  ? "" :
					       k == n - 1 ? " or " :
							    ", ",
					       r->names[k]);
	} else if (r->kind == SECONDS) {
		snprintf(err + at, errlen - at, "seconds from 0 to %.0f, such as 0, 0.5, 1 or 3600",
			 BFS_MAX_TIMEOUT);
	} else {
		snprintf(err + at, errlen - at, "%s%s from %llu to %llu", r->zero_ok ? "0 or " : "",
			 r->unit ? r->unit : "a count", (unsigned long long)r->min,
			 (unsigned long long)r->max);
	}
	return -EINVAL;
}

/* Row @r's value: its default, or @s (NULL: not given) checked. */
static int take(struct bfs_opts *o, const struct row *r, const char *s, char *err, size_t errlen)
{
	uint64_t v = r->def;
	double d = (double)r->def;
	int i;

	switch (r->kind) {
	case FLAG:
		return 0; /* set by fuse_opt_parse() itself */
	case SIZE:
	case COUNT:
		if (s && ((r->kind == SIZE ? bfs_parse_size(s, &v) : count(s, r->max, &v)) < 0 ||
			  ((v < r->min || v > r->max) && !(v == 0 && r->zero_ok))))
			return refuse(r, s, err, errlen);
		put(o, r, v);
		return 0;
	case SECONDS:
		if (s && seconds(s, &d) < 0)
			return refuse(r, s, err, errlen);
		put_double(o, r, d);
		return 0;
	case PICK:
		if (s) {
			i = bfs_pick(s, r->names, SIZE_MAX);
			if (i < 0)
				return refuse(r, s, err, errlen);
			v = r->map ? (uint64_t)r->map[i] : (uint64_t)i;
		}
		put(o, r, v);
		return 0;
	case CUSTOM:
		return r->check(o, s) < 0 ? refuse(r, s, err, errlen) : 0;
	}
	return -EINVAL;
}

int bfs_opts_check(struct bfs_opts *o, char *err, size_t errlen)
{
	for (size_t i = 0; i < ROWS; i++)
		if (take(o, &rows[i], o->given[i], err, errlen) < 0)
			return -EINVAL;
	return 0;
}

/* --- the options no kind describes ----------------------------------------------- */

static int check_readpath(struct bfs_opts *o, const char *s)
{
	o->readpath = BFS_READPATH_PREAD;
	return s ? bfs_readpath_parse(s, strlen(s), &o->readpath) : 0;
}

/* The names are the hints' (hints.c); dontneed acts on ranges and is no default. */
static int check_advice(struct bfs_opts *o, const char *s)
{
	struct bfs_advice_req adv;

	o->advice = BFS_ADV_NORMAL;
	if (!s)
		return 0;
	if (bfs_advice_parse(s, strlen(s), &adv) < 0 || adv.ranged ||
	    adv.advice == BFS_ADV_DONTNEED)
		return -EINVAL;
	o->advice = adv.advice;
	return 0;
}

/* A count like the others, but by default one a CPU, which may be more than -o takes. */
static int check_workers(struct bfs_opts *o, const char *s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t n;

	o->workers = cpus > 0 ? (unsigned int)cpus : 1;
	if (!s)
		return 0;
	if (count(s, BFS_MAX_WORKERS, &n) < 0)
		return -EINVAL;
	o->workers = (unsigned int)n;
	return 0;
}

static int check_readdirplus(struct bfs_opts *o, const char *s)
{
	uint64_t n;

	o->readdirplus = BFS_READDIRPLUS_ON;
	o->readdirplus_auto = !s || strcmp(s, "auto") == 0;
	if (o->readdirplus_auto || strcmp(s, "on") == 0)
		return 0;
	if (strcmp(s, "off") == 0) {
		o->readdirplus = 0;
		return 0;
	}
	if (count(s, UINT32_MAX, &n) < 0 || n == 0)
		return -EINVAL;
	o->readdirplus = (size_t)n;
	return 0;
}

static int check_index_cache(struct bfs_opts *o, const char *s)
{
	o->index_cache = NULL;
	o->index_cache_off = false;
	if (!s)
		return 0;
	if (!*s)
		return -EINVAL;
	/* A directory called off is ./off. */
	o->index_cache_off = strcmp(s, "off") == 0;
	if (!o->index_cache_off)
		o->index_cache = s; /* opened, and checked, by main() */
	return 0;
}

void bfs_opts_release(struct bfs_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	for (size_t i = 0; i < ROWS; i++)
		free(o->given[i]);
	memset(o, 0, sizeof(*o));
}

/* Where the help texts start, and the width they wrap at: as fuse_cmdline_help() does. */
#define HELP_COL   27
#define HELP_WIDTH 79

void bfs_opts_help(FILE *out)
{
	fprintf(out, "blockfs options:\n");
	for (size_t i = 0; i < ROWS; i++) {
		const char *h = rows[i].help;
		int col;

		if (!h)
			continue;
		if (rows[i].values)
			col = fprintf(out, "    -o %s=%s", rows[i].name, rows[i].values);
		else
			col = fprintf(out, "    -o %s", rows[i].name);
		/* A long left side gets its text on the next line, all texts in one column. */
		while (*h) {
			size_t n = strlen(h);

			if (col >= HELP_COL) {
				fputc('\n', out);
				col = 0;
			}
			if (n > HELP_WIDTH - HELP_COL) { /* wrap at the last space that fits */
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
