// SPDX-License-Identifier: MIT
/*
 * blockfs-stat: what blockfs knows about mounted files, read through
 * getxattr(2) only (the user.blockfs.* attributes of man 8 blockfs), so it works
 * on any blockfs mount a user can read, with no access to the daemon.
 * For each PATH: format, sizes, ratio, blocks, cached bytes, where the
 * index came from and its memory (gzip: checkpoints, walk), effective
 * hints and counters; on the mount root, the mount-wide counters. A table
 * for people, --json for scripts.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#define EXIT_USAGE	 2
#define PREFIX		 "user.blockfs."
#define MAX_STATS	 32
#define FUSE_SUPER_MAGIC 0x65735546 /* linux/magic.h */

/* What one path told us. */
struct info {
	const char *path;
	bool dir, root; /* root: a directory with mount-wide stats */
	char format[32], advice[64], readpath[32];
	char index_source[32], walk[32]; /* "" when absent */
	bool has_csize, has_bsize, has_blocks, has_cached, has_ibytes, has_cps;
	bool has_units, has_umax;
	uint64_t size, csize, bsize, blocks, cached, ibytes, cps, units, umax;
	/* "" or: why random reads are costly, and the command that fixes it */
	char repack[3 * PATH_MAX + 128], warning[3 * PATH_MAX + 640];
	size_t nstats;
	struct {
		char key[48];
		uint64_t v;
	} stats[MAX_STATS];
};

/*
 * One attribute as a C string. Return: 0, -ENODATA when absent, other
 * -errno. The buffer grows on ERANGE (the value may grow between calls).
 */
static int get(const char *path, const char *name, char **out)
{
	size_t cap = 256;
	char *buf = NULL;

	for (;;) {
		char *nb = realloc(buf, cap + 1);
		ssize_t n;

		if (!nb) {
			free(buf);
			return -ENOMEM;
		}
		buf = nb;
		n = getxattr(path, name, buf, cap);
		if (n >= 0) {
			buf[n] = '\0';
			*out = buf;
			return 0;
		}
		if (errno != ERANGE || cap >= (1u << 20)) {
			int rc = errno == ENOTSUP ? -ENODATA : -errno;

			free(buf);
			return rc;
		}
		cap *= 4;
	}
}

static int get_str(const char *path, const char *name, char *dst, size_t len)
{
	char *v;
	int rc = get(path, name, &v);

	if (rc == 0) {
		snprintf(dst, len, "%s", v);
		free(v);
	}
	return rc;
}

/* get_str() of an attribute that may not apply: "" then. */
static int get_opt_str(const char *path, const char *name, char *dst, size_t len)
{
	int rc = get_str(path, name, dst, len);

	if (rc == -ENODATA) {
		*dst = '\0';
		return 0;
	}
	return rc;
}

static int get_u64(const char *path, const char *name, uint64_t *dst, bool *has)
{
	char *v, *end;
	int rc = get(path, name, &v);

	*has = false;
	if (rc < 0)
		return rc == -ENODATA ? 0 : rc;
	errno = 0;
	*dst = strtoull(v, &end, 10);
	*has = end != v && *end == '\0' && errno == 0;
	free(v);
	return 0;
}

static void parse_stats(struct info *in, char *text)
{
	for (char *line = strtok(text, "\n"); line && in->nstats < MAX_STATS;
	     line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');

		if (!sp || (size_t)(sp - line) >= sizeof(in->stats[0].key))
			continue;
		*sp = '\0';
		snprintf(in->stats[in->nstats].key, sizeof(in->stats[0].key), "%s", line);
		in->stats[in->nstats].v = strtoull(sp + 1, NULL, 10);
		in->nstats++;
	}
}

/*
 * Is @path (@st) on a blockfs mount? By the filesystem, not by attributes:
 * a copy of a mounted file elsewhere may carry user.blockfs.* attributes
 * too. statfs(2) must say FUSE, and the mount table line of @st's device
 * fuse.blockfs; @type gets that line's type for the message either way.
 */
static bool on_blockfs(const char *path, const struct stat *st, char *type, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *dash;
	unsigned int ma, mi;
	struct statfs sf;
	size_t cap = 0;

	snprintf(type, len, "unknown");
	while (f && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE ... */
		if (sscanf(line, "%*u %*u %u:%u", &ma, &mi) != 2 || ma != major(st->st_dev) ||
		    mi != minor(st->st_dev))
			continue;
		dash = strstr(line, " - ");
		if (dash) /* the last line of the device is the mount on top */
			snprintf(type, len, "%.*s", (int)strcspn(dash + 3, " \n"), dash + 3);
	}
	free(line);
	if (f)
		fclose(f);
	return statfs(path, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC &&
	       strcmp(type, "fuse.blockfs") == 0;
}

/* Return: 0, or a message for the path in @why. */
static int collect(const char *path, struct info *in, char *why, size_t wlen)
{
	char *stats = NULL, type[64];
	struct stat st;
	int rc;

	memset(in, 0, sizeof(*in));
	in->path = path;
	if (stat(path, &st) < 0) {
		snprintf(why, wlen, "%s", strerror(errno));
		return -1;
	}
	in->dir = S_ISDIR(st.st_mode);
	in->size = (uint64_t)st.st_size;
	if (!on_blockfs(path, &st, type, sizeof(type))) {
		snprintf(why, wlen, "not on a blockfs mount (its filesystem is %s)", type);
		return -1;
	}
	/* Every file and directory of a blockfs mount has an advice. */
	rc = get_str(path, PREFIX "advice", in->advice, sizeof(in->advice));
	if (rc == 0)
		rc = get_str(path, PREFIX "readpath", in->readpath, sizeof(in->readpath));
	if (rc == 0 && !in->dir) {
		rc = get_str(path, PREFIX "format", in->format, sizeof(in->format));
		if (rc == 0)
			rc = get_u64(path, PREFIX "compressed_size", &in->csize, &in->has_csize);
		if (rc == 0)
			rc = get_u64(path, PREFIX "block_size", &in->bsize, &in->has_bsize);
		if (rc == 0)
			rc = get_u64(path, PREFIX "blocks", &in->blocks, &in->has_blocks);
		if (rc == 0)
			rc = get_u64(path, PREFIX "units", &in->units, &in->has_units);
		if (rc == 0)
			rc = get_u64(path, PREFIX "unit_max", &in->umax, &in->has_umax);
		if (rc == 0)
			rc = get_u64(path, PREFIX "cached", &in->cached, &in->has_cached);
		/* read by name: not listed, and absent where they do not apply */
		if (rc == 0)
			rc = get_opt_str(path, PREFIX "index_source", in->index_source,
					 sizeof(in->index_source));
		if (rc == 0)
			rc = get_u64(path, PREFIX "index_bytes", &in->ibytes, &in->has_ibytes);
		if (rc == 0)
			rc = get_u64(path, PREFIX "checkpoints", &in->cps, &in->has_cps);
		if (rc == 0)
			rc = get_opt_str(path, PREFIX "walk", in->walk, sizeof(in->walk));
	}
	if (rc == 0) {
		rc = get(path, PREFIX "stats", &stats);
		if (rc == 0) {
			in->root = in->dir;
			parse_stats(in, stats);
			free(stats);
		} else if (rc == -ENODATA) {
			rc = 0; /* a directory below the root */
		}
	}
	if (rc < 0) {
		snprintf(why, wlen, "%s", strerror(-rc));
		return -1;
	}
	return 0;
}

/* --- the table ------------------------------------------------------------ */

static const char *human(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", v);
	else
		snprintf(buf, len, "%.1f %s (%" PRIu64 ")", d, units[u], v);
	return buf;
}

static bool is_bytes_key(const char *k)
{
	size_t n = strlen(k);

	return strcmp(k, "bytes") == 0 || strcmp(k, "cache_limit") == 0 ||
	       strcmp(k, "spill_limit") == 0 || (n > 6 && strcmp(k + n - 6, "_bytes") == 0);
}

#define ROW "  %-20s %s\n"

/*
 * Above this block size a random read is slow: each decodes a whole block
 * (with the lz4 CLI's default 4 MiB blocks, a 4 KiB read decodes 4 MiB;
 * doc/decisions/0010-pack-defaults.md). zstd and xz: the same bound on a
 * unit (a frame or block, decoded from its start), blockfs-pack's
 * default. bzip2 decodes many
 * times slower than either, so its bound is lower: 256 KiB (bzip2 -3
 * and up; bzip2's default, -9, makes 900 kB blocks).
 */
#define SLOW_BLOCK (1u << 20)
#define SLOW_BZIP2 (256u << 10)

/* @s quoted for a shell when it needs to be, into @out. */
static void shell_word(const char *s, char *out, size_t len)
{
	size_t o = 0;

	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789_-./+,:=@%") == strlen(s)) {
		snprintf(out, len, "%s", s);
		return;
	}
	for (const char *p = s; *p && o + 6 < len; p++) {
		if (o == 0)
			out[o++] = '\'';
		if (*p == '\'') {
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			out[o++] = *p;
		}
	}
	if (o == 0)
		out[o++] = '\'';
	out[o++] = '\'';
	out[o] = '\0';
}

/*
 * Fill in->warning (and in->repack, the command) for a file whose layout
 * makes random reads costly; leave them "" otherwise. The command packs
 * the decoded file, read through the mount at @in->path, into NAME.zst
 * or NAME.xz in the current directory, to put in place of the backing
 * file.
 */
static void judge_layout(struct info *in)
{
	const char *fmt = in->format, *codec = NULL, *unit = "block";
	char h[64], name[PATH_MAX / 2], qname[PATH_MAX], qpath[2 * PATH_MAX];
	const char *base = strrchr(in->path, '/');
	uint64_t slow = strcmp(fmt, "bzip2") == 0 ? SLOW_BZIP2 : SLOW_BLOCK;

	in->warning[0] = in->repack[0] = '\0';
	if (strcmp(fmt, "zstd") == 0)
		codec = "zstd", unit = "frame";
	else if (strcmp(fmt, "xz") == 0 || strcmp(fmt, "bzip2") == 0)
		codec = "xz";
	if (!codec) {
		if (in->has_bsize && in->bsize > SLOW_BLOCK)
			snprintf(in->warning, sizeof(in->warning), "%s",
				 "random reads decode a whole block each and will be slow; for "
				 "random access repack with blockfs-pack (256 KiB blocks) or "
				 "lz4 -B4 (64 KiB)");
		return;
	}
	if (!in->has_units || !in->has_umax || in->umax <= slow)
		return;
	base = base ? base + 1 : in->path;
	snprintf(name, sizeof(name), "%s.%s", *base ? base : "out",
		 strcmp(codec, "zstd") == 0 ? "zst" : "xz");
	shell_word(name, qname, sizeof(qname));
	shell_word(in->path, qpath, sizeof(qpath));
	snprintf(in->repack, sizeof(in->repack), "blockfs-pack -c %s -o %s %s", codec, qname,
		 qpath);
	human(in->umax, h, sizeof(h));
	if (strcmp(fmt, "bzip2") == 0)
		snprintf(
			in->warning, sizeof(in->warning),
			"%" PRIu64 " bzip2 block%s of up to %s: each random read decodes a whole "
			"block, and bzip2 decodes slowly; make it seekable (1 MiB xz blocks) with: "
			"%s",
			in->units, in->units == 1 ? "" : "s", h, in->repack);
	else if (in->units == 1)
		snprintf(in->warning, sizeof(in->warning),
			 "one %s %s of %s holds the whole file: a random read decodes from its "
			 "start, up to all of it; make it seekable (1 MiB %ss) with: %s",
			 fmt, unit, h, unit, in->repack);
	else
		snprintf(in->warning, sizeof(in->warning),
			 "%" PRIu64 " %s %ss, the largest %s: a random read decodes from the start "
			 "of its %s; make it seekable (1 MiB %ss) with: %s",
			 in->units, fmt, unit, h, unit, unit, in->repack);
}

static void print_table(const struct info *in)
{
	char h[64], v[64];

	printf("%s%s\n", in->path, in->root ? "  (mount root)" : in->dir ? "  (directory)" : "");
	if (!in->dir) {
		printf(ROW, "format", in->format);
		printf(ROW, "size", human(in->size, h, sizeof(h)));
		if (in->has_csize)
			printf(ROW, "compressed", human(in->csize, h, sizeof(h)));
		if (in->has_csize && in->csize) {
			snprintf(v, sizeof(v), "%.2f", (double)in->size / (double)in->csize);
			printf(ROW, "ratio", v);
		}
		if (in->has_bsize)
			printf(ROW, "block size", human(in->bsize, h, sizeof(h)));
		if (in->has_blocks) {
			snprintf(v, sizeof(v), "%" PRIu64, in->blocks);
			printf(ROW, "blocks", v);
		}
		/* Only where units are not blocks: chains of spans, one per frame or xz block. */
		if (in->has_units && in->has_umax && in->has_blocks && in->units != in->blocks) {
			snprintf(v, sizeof(v), "%" PRIu64 ", the largest ", in->units);
			human(in->umax, h, sizeof(h));
			printf("  %-20s %s%s\n", "decoded as", v, h);
		}
		if (in->has_cached)
			printf(ROW, "cached", human(in->cached, h, sizeof(h)));
		if (*in->warning)
			printf(ROW, "warning", in->warning);
		if (*in->index_source)
			printf(ROW, "index from", in->index_source);
		if (in->has_ibytes)
			printf(ROW, "index memory", human(in->ibytes, h, sizeof(h)));
		if (in->has_cps) {
			snprintf(v, sizeof(v), "%" PRIu64, in->cps);
			printf(ROW, "checkpoints", v);
		}
		if (*in->walk)
			printf(ROW, "walk", in->walk);
	}
	printf(ROW, "advice", in->advice);
	printf(ROW, "readpath", in->readpath);
	if (in->nstats)
		printf("  %s\n", in->root ? "mount counters" : "counters");
	for (size_t i = 0; i < in->nstats; i++) {
		if (is_bytes_key(in->stats[i].key))
			human(in->stats[i].v, h, sizeof(h));
		else
			snprintf(h, sizeof(h), "%" PRIu64, in->stats[i].v);
		printf("    %-22s %s\n", in->stats[i].key, h);
	}
}

/* --- JSON ----------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void json_u64(const char *key, uint64_t v, bool has)
{
	printf(", \"%s\": ", key);
	if (has)
		printf("%" PRIu64, v);
	else
		printf("null");
}

static void print_json(const struct info *in, const char *err)
{
	printf("{\"path\": ");
	json_str(in->path);
	if (err) {
		printf(", \"error\": ");
		json_str(err);
		printf("}");
		return;
	}
	printf(", \"type\": \"%s\"", in->root ? "root" : in->dir ? "directory" : "file");
	if (!in->dir) {
		printf(", \"format\": ");
		json_str(in->format);
		json_u64("size", in->size, true);
		json_u64("compressed_size", in->csize, in->has_csize);
		if (in->has_csize && in->csize)
			printf(", \"ratio\": %.4f", (double)in->size / (double)in->csize);
		else
			printf(", \"ratio\": null");
		json_u64("block_size", in->bsize, in->has_bsize);
		json_u64("blocks", in->blocks, in->has_blocks);
		json_u64("cached", in->cached, in->has_cached);
		json_u64("units", in->units, in->has_units);
		json_u64("unit_max", in->umax, in->has_umax);
		printf(", \"warning\": ");
		*in->warning ? json_str(in->warning) : (void)printf("null");
		printf(", \"repack\": ");
		*in->repack ? json_str(in->repack) : (void)printf("null");
		printf(", \"index_source\": ");
		*in->index_source ? json_str(in->index_source) : (void)printf("null");
		json_u64("index_bytes", in->ibytes, in->has_ibytes);
		json_u64("checkpoints", in->cps, in->has_cps);
		printf(", \"walk\": ");
		*in->walk ? json_str(in->walk) : (void)printf("null");
	}
	printf(", \"advice\": ");
	json_str(in->advice);
	printf(", \"readpath\": ");
	json_str(in->readpath);
	if (in->nstats) {
		printf(", \"stats\": {");
		for (size_t i = 0; i < in->nstats; i++)
			printf("%s\"%s\": %" PRIu64, i ? ", " : "", in->stats[i].key,
			       in->stats[i].v);
		printf("}");
	}
	printf("}");
}

static void usage(FILE *out)
{
	fprintf(out, "usage: blockfs-stat [--json] PATH...\n"
		     "Show what blockfs knows about files and directories on a blockfs mount:\n"
		     "format, sizes, ratio, blocks, cached bytes, hints and counters; on the\n"
		     "mount root, the whole mount's counters. Reads user.blockfs.* attributes.\n"
		     "\n"
		     "  -j, --json     one JSON array, an object per PATH\n"
		     "  -h, --help     this text\n"
		     "  -V, --version  version\n"
		     "Exit status: 0, 1 when any PATH could not be shown, 2 on bad usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int opt, status = 0;

	while ((opt = getopt_long(argc, argv, "jhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("blockfs-stat %s\n", BFS_VERSION);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (json)
		printf("[");
	for (int i = optind; i < argc; i++) {
		struct info *in = malloc(sizeof(*in));
		char why[256];
		bool bad;

		if (!in) {
			fprintf(stderr, "blockfs-stat: out of memory\n");
			return 1;
		}
		bad = collect(argv[i], in, why, sizeof(why)) < 0;
		if (!bad && !in->dir)
			judge_layout(in);
		if (bad) {
			fprintf(stderr, "blockfs-stat: %s: %s\n", argv[i], why);
			status = 1;
		}
		if (json) {
			printf("%s\n  ", i > optind ? "," : "");
			print_json(in, bad ? why : NULL);
		} else if (!bad) {
			if (i > optind)
				putchar('\n');
			print_table(in);
		}
		free(in);
	}
	if (json)
		printf("\n]\n");
	return status;
}
