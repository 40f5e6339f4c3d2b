// SPDX-License-Identifier: MIT
/*
 * blockfs-pack: make files that blockfs serves best, from plain files and
 * trees (seekable LZ4 frames, BGZF with a .gzi, the zstd seekable format,
 * multi-block xz), check such files (-t)
 * and index existing ones (--index). This file owns the command line:
 * the options, which input goes to which output (FILE..., -o, -r's tree
 * walk and hard links) and what -u keeps. pack_output.c writes each
 * output (temporary names, renames, interrupts, messages, the progress
 * line), pack_stream.c compresses, pack_check.c checks and indexes. Calls
 * only go down: this file calls the other three, pack_check.c calls
 * pack_output.c, which calls pack_stream.c; none calls back up.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "blockfs/codec.h"
#include "blockfs/index_cache.h"
#include "blockfs/opts.h"
#include "pack.h"

#define EXIT_USAGE  2
#define MAX_THREADS 1024

enum { OPT_INDEX = 256, OPT_NO_CHECKSUM, OPT_INDEX_CACHE, OPT_GZIP_SPAN };

/* ---- FILE... and -r: what goes where ---- */

struct ctx {
	struct pk_opts o;
	struct pk_writer w; /* its pool, progress line and stop */
	const char *ext;    /* pk_codec_ext() */
	const char *out;    /* -o */
	int failures;
	uint64_t skipped, current; /* devices and sockets; outputs -u kept */
	/* -r */
	dev_t dst_dev;
	ino_t dst_ino;
	struct link {
		dev_t dev;
		ino_t ino;
		char *out;
	} * links;
	size_t nlinks;
};

static bool is_root(void)
{
	return geteuid() == 0;
}

/* Overwrite what is there: -f, or -u for an output that is not current. */
static bool replacing(const struct ctx *c)
{
	return pk_replacing(&c->o);
}

/*
 * -u: is @out an output of @ist that need not be made again? Complete and
 * valid (pk_output_current()), and not older than its input (outputs take
 * their input's mtime, so an input changed since is newer).
 */
static bool current(struct ctx *c, const char *out, const struct stat *ist)
{
	struct stat ost;

	if (!c->o.update || lstat(out, &ost) < 0 || !S_ISREG(ost.st_mode) ||
	    ost.st_mtim.tv_sec < ist->st_mtim.tv_sec ||
	    (ost.st_mtim.tv_sec == ist->st_mtim.tv_sec &&
	     ost.st_mtim.tv_nsec < ist->st_mtim.tv_nsec) ||
	    !pk_output_current(out, &c->o, (uint64_t)ist->st_size))
		return false;
	c->current++;
	if (c->o.verbose)
		fprintf(stderr, "%s: up to date\n", out);
	return true;
}

/* ---- FILE... ---- */

static const char *packed_suffix(const char *name)
{
	static const char *const sfx[] = { ".lz4",  ".gz", ".bgz", ".tlz4", ".tgz", ".zst",
					   ".tzst", ".xz", ".txz", ".bz2",  ".tbz2" };
	size_t len = strlen(name);

	for (size_t i = 0; i < BFS_ARRAY_SIZE(sfx); i++) {
		size_t sl = strlen(sfx[i]);

		if (len > sl && strcmp(name + len - sl, sfx[i]) == 0)
			return sfx[i];
	}
	return NULL;
}

static int pack_file(struct ctx *c, const char *path)
{
	struct stat ist, ost;
	char *out_path = NULL;
	const char *sfx;
	int in, rc;

	if (strcmp(path, "-") == 0) {
		const char *o = c->out && strcmp(c->out, "-") != 0 ? c->out : NULL;

		if (!o && isatty(STDOUT_FILENO) && !c->o.force) {
			pk_err("refusing to write compressed data to a terminal (use -o FILE or -f)");
			return 1;
		}
		if (o && !c->o.force && lstat(o, &ost) == 0) {
			pk_err("%s: already exists; use -f to overwrite", o);
			return 1;
		}
		return pk_write(&c->w, STDIN_FILENO, NULL, "standard input", o);
	}
	sfx = packed_suffix(path);
	if (sfx && !c->out) {
		pk_err("%s: already has the %s suffix; not packing it again (use --index to add a "
		       "seek table, or -o to name the output)",
		       path, sfx);
		return 1;
	}
	in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (in < 0) {
		pk_err("%s: %s", path, strerror(errno));
		return 1;
	}
	if (fstat(in, &ist) < 0) {
		pk_err("%s: %s", path, strerror(errno));
		close(in);
		return 1;
	}
	if (S_ISDIR(ist.st_mode)) {
		pk_err("%s: is a directory (use -r SRC DST)", path);
		close(in);
		return 1;
	}
	if (c->out && strcmp(c->out, "-") == 0) {
		if (isatty(STDOUT_FILENO) && !c->o.force) {
			pk_err("refusing to write compressed data to a terminal (use -f)");
			close(in);
			return 1;
		}
		rc = pk_write(&c->w, in, NULL, path, NULL);
		close(in);
		return rc;
	}
	if (c->out)
		out_path = strdup(c->out);
	else if (asprintf(&out_path, "%s%s", path, c->ext) < 0)
		out_path = NULL;
	if (!out_path) {
		pk_err("out of memory");
		close(in);
		return 1;
	}
	if (stat(out_path, &ost) == 0) {
		if (ost.st_dev == ist.st_dev && ost.st_ino == ist.st_ino) {
			pk_err("%s: is its own output", path);
			rc = 1;
			goto out;
		}
		if (S_ISREG(ist.st_mode) && current(c, out_path, &ist)) {
			rc = 0;
			goto out;
		}
		if (!replacing(c)) {
			pk_err("%s: already exists; use -f to overwrite, -u to update", out_path);
			rc = 1;
			goto out;
		}
	}
	rc = pk_write(&c->w, in, S_ISREG(ist.st_mode) ? &ist : NULL, path, out_path);
out:
	free(out_path);
	close(in);
	return rc;
}

/* ---- -r SRC DST ---- */

static char *join(const char *a, const char *b)
{
	char *p;

	return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

static void tree_fail(struct ctx *c, const char *path, const char *what, int err)
{
	pk_err("%s: %s%s%s%s", path, what, err ? ": " : "", err ? strerror(err) : "",
	       pk_stop_note(&c->w, err));
	c->failures++;
}

/* Owner, mode and times of @st onto @path, which is not a symbolic link. */
static void set_meta_path(const char *path, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (is_root())
		(void)!lchown(path, st->st_uid, st->st_gid);
	(void)chmod(path, st->st_mode & 07777);
	(void)utimensat(AT_FDCWD, path, ts, 0);
}

/* Is @path the object @st describes? */
static bool same_inode(const struct stat *st, const char *path)
{
	struct stat o;

	return lstat(path, &o) == 0 && o.st_dev == st->st_dev && o.st_ino == st->st_ino;
}

static struct link *link_find(struct ctx *c, const struct stat *st)
{
	for (size_t i = 0; i < c->nlinks; i++)
		if (c->links[i].dev == st->st_dev && c->links[i].ino == st->st_ino)
			return &c->links[i];
	return NULL;
}

static void link_add(struct ctx *c, const struct stat *st, const char *out)
{
	struct link *nl = realloc(c->links, (c->nlinks + 1) * sizeof(*nl));

	if (!nl)
		return; /* then it is packed again: only slower */
	c->links = nl;
	nl[c->nlinks].out = strdup(out);
	if (!nl[c->nlinks].out)
		return;
	nl[c->nlinks].dev = st->st_dev;
	nl[c->nlinks].ino = st->st_ino;
	c->nlinks++;
}

/* The .gzi of a hard-linked .gz, linked too: blockfs finds it by name. */
static void link_gzi(struct ctx *c, const char *first, const char *out)
{
	char *a = NULL, *b = NULL;

	if (asprintf(&a, "%s.gzi", first) >= 0 && asprintf(&b, "%s.gzi", out) >= 0) {
		if (replacing(c))
			unlink(b);
		if (access(a, F_OK) == 0 && link(a, b) < 0)
			tree_fail(c, b, "cannot link", errno);
	}
	free(a);
	free(b);
}

/* A regular file of the tree: packed to NAME.lz4 (stored blocks where it does not shrink). */
static void tree_file(struct ctx *c, const char *sp, const char *dp, const struct stat *st)
{
	struct link *l = st->st_nlink > 1 ? link_find(c, st) : NULL;
	struct stat ost;
	char *out;
	int in;

	if (asprintf(&out, "%s%s", dp, c->ext) < 0) {
		tree_fail(c, sp, "out of memory", 0);
		return;
	}
	if (lstat(out, &ost) == 0) {
		if (S_ISDIR(ost.st_mode) || !replacing(c)) {
			tree_fail(c, out, "already exists (another entry of SRC, or use -f or -u)",
				  0);
			goto out;
		}
		if (l ? same_inode(&ost, l->out) : current(c, out, st)) {
			if (!l && st->st_nlink > 1)
				link_add(c, st, out);
			goto out; /* -u: current, or already the link it should be */
		}
	}
	if (l) {
		/* A hard link in SRC is a hard link in DST: packed once. */
		if (replacing(c))
			unlink(out);
		if (link(l->out, out) < 0)
			tree_fail(c, out, "cannot link", errno);
		else if (c->o.codec == PK_GZIP)
			link_gzi(c, l->out, out);
		goto out;
	}
	in = open(sp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (in < 0) {
		tree_fail(c, sp, "cannot open", errno);
		goto out;
	}
	if (pk_write(&c->w, in, st, sp, out) != 0)
		c->failures++;
	else if (st->st_nlink > 1)
		link_add(c, st, out);
	close(in);
out:
	free(out);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void tree_dir(struct ctx *c, const char *src, const char *dst);

static void tree_entry(struct ctx *c, const char *src, const char *dst, const char *name)
{
	char *sp = join(src, name), *dp = join(dst, name);
	struct stat st, dst_st;

	if (!sp || !dp) {
		tree_fail(c, src, "out of memory", 0);
		goto out;
	}
	if (lstat(sp, &st) < 0) {
		tree_fail(c, sp, "cannot stat", errno);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if (st.st_dev == c->dst_dev && st.st_ino == c->dst_ino)
			goto out; /* DST inside SRC: not packed into itself */
		if (mkdir(dp, 0700) < 0 && !(errno == EEXIST && replacing(c) &&
					     stat(dp, &dst_st) == 0 && S_ISDIR(dst_st.st_mode))) {
			tree_fail(c, dp, "cannot create directory", errno);
			goto out;
		}
		tree_dir(c, sp, dp);
		set_meta_path(dp, &st); /* after its entries: they change its mtime */
	} else if (S_ISREG(st.st_mode)) {
		tree_file(c, sp, dp, &st);
	} else if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX + 1];
		ssize_t n = readlink(sp, target, PATH_MAX);
		struct timespec ts[2] = { st.st_atim, st.st_mtim };

		if (n < 0) {
			tree_fail(c, sp, "cannot read link", errno);
			goto out;
		}
		target[n] = '\0';
		if (replacing(c) && lstat(dp, &dst_st) == 0 && !S_ISDIR(dst_st.st_mode))
			unlink(dp);
		if (symlink(target, dp) < 0) {
			tree_fail(c, dp, "cannot create link", errno);
			goto out;
		}
		if (is_root())
			(void)!lchown(dp, st.st_uid, st.st_gid);
		(void)utimensat(AT_FDCWD, dp, ts, AT_SYMLINK_NOFOLLOW);
	} else if (S_ISFIFO(st.st_mode)) {
		if (mkfifo(dp, 0600) < 0 && !(errno == EEXIST && replacing(c))) {
			tree_fail(c, dp, "cannot create fifo", errno);
			goto out;
		}
		set_meta_path(dp, &st);
	} else {
		if (!c->o.quiet)
			pk_err("%s: skipped (a device or socket)", sp);
		c->skipped++;
	}
out:
	free(sp);
	free(dp);
}

static void tree_dir(struct ctx *c, const char *src, const char *dst)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	fd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		tree_fail(c, src, "cannot read directory", errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*nn));

			if (!nn)
				break;
			names = nn;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	if (errno)
		tree_fail(c, src, "cannot read directory", errno);
	closedir(d);
	/* Sorted: the same tree packs the same way, whatever readdir's order. */
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (!c->w.stop)
			tree_entry(c, src, dst, names[i]);
		free(names[i]);
	}
	free(names);
}

static uint64_t tree_total;

static int count_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode))
		tree_total += (uint64_t)st->st_size;
	return 0;
}

static int pack_tree(struct ctx *c, const char *src, const char *dst)
{
	struct stat sst, dst_st;

	if (stat(src, &sst) < 0) {
		pk_err("%s: %s", src, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(sst.st_mode)) {
		pk_err("%s: not a directory", src);
		return 1;
	}
	if (lstat(dst, &dst_st) == 0) {
		if (!replacing(c)) {
			pk_err("%s: already exists; -r packs into a new tree (use -u to update it, "
			       "-f to pack everything again)",
			       dst);
			return 1;
		}
		if (!S_ISDIR(dst_st.st_mode)) {
			pk_err("%s: exists and is not a directory", dst);
			return 1;
		}
	} else if (mkdir(dst, 0700) < 0) {
		pk_err("%s: cannot create directory: %s", dst, strerror(errno));
		return 1;
	}
	if (stat(dst, &dst_st) < 0) {
		pk_err("%s: %s", dst, strerror(errno));
		return 1;
	}
	c->dst_dev = dst_st.st_dev;
	c->dst_ino = dst_st.st_ino;
	if (c->w.prog.on) {
		tree_total = 0;
		nftw(src, count_file, 64, FTW_PHYS | FTW_MOUNT);
		c->w.prog.total = tree_total;
	}
	tree_dir(c, src, dst);
	set_meta_path(dst, &sst);
	for (size_t i = 0; i < c->nlinks; i++)
		free(c->links[i].out);
	free(c->links);
	pk_progress_clear();
	if (c->skipped && !c->o.quiet)
		pk_err("%" PRIu64 " devices or sockets skipped", c->skipped);
	if (c->current && !c->o.quiet && !c->w.stop)
		fprintf(stderr, "%" PRIu64 " outputs already up to date, kept\n", c->current);
	return c->failures ? 1 : 0;
}

/* ---- command line ---- */

/* The output suffix of @codec. */
static const char *pk_codec_ext(enum pk_codec codec)
{
	switch (codec) {
	case PK_GZIP:
		return ".gz";
	case PK_ZSTD:
		return ".zst";
	case PK_XZ:
		return ".xz";
	default:
		return ".lz4";
	}
}

/* Per codec: its name, its levels, its block sizes. */
static const struct codec_row {
	const char *name;
	long lo, hi, def;    /* -l */
	uint32_t bmax, bdef; /* -B: PK_BLOCK_MIN to bmax */
} codec_rows[] = {
	[PK_LZ4] = { "lz4", 1, 12, 1, PK_BLOCK_MAX, PK_LZ4_DEFAULT_BLOCK },
	[PK_LZ4HC] = { "lz4hc", 3, 12, 9, PK_BLOCK_MAX, PK_LZ4_DEFAULT_BLOCK },
	[PK_GZIP] = { "gzip", 0, 9, 6, PK_BGZF_BLOCK, PK_BGZF_BLOCK },
	[PK_ZSTD] = { "zstd", 1, 19, 3, PK_ZSTD_BLOCK_MAX, PK_FRAME_DEFAULT_BLOCK },
	[PK_XZ] = { "xz", 0, 9, 6, PK_XZ_BLOCK_MAX, PK_FRAME_DEFAULT_BLOCK },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: blockfs-pack [OPTIONS] FILE...       pack each FILE to FILE.lz4 (.gz, .zst, .xz); '-' = stdin to stdout\n"
		"       blockfs-pack [OPTIONS] -r SRC DST    pack the tree SRC into a new tree DST\n"
		"       blockfs-pack -t FILE...              check packed files\n"
		"       blockfs-pack --index FILE...         add a seek table (.lz4) or write the .gzi (BGZF)\n"
		"       blockfs-pack --index --index-cache DIR [--gzip-span SIZE] FILE...\n"
		"                                            keep the index a mount would make of each\n"
		"                                            FILE (any format blockfs decodes) in DIR for\n"
		"                                            mounts with -o index_cache=DIR\n"
		"\n"
		"  -c, --codec FORMAT           lz4, lz4hc, gzip (BGZF), zstd (the zstd seekable format)\n"
		"                               or xz (multi-block); default lz4\n"
		"  -l, --level N                lz4 1-12 (3+ is HC; default 1), lz4hc 3-12 (default 9),\n"
		"                               gzip 0-9 (default 6), zstd 1-19 (default 3),\n"
		"                               xz 0-9 (default 6)\n"
		"  -B, --block-size SIZE        decompressed bytes per block, K/M suffixes: lz4 4K-4M\n"
		"                               (default 256K), gzip 4K-65280 (default 65280),\n"
		"                               zstd 4K-32M, xz 4K-64M (default 1M)\n"
		"  -j, --threads N              compression threads (default: online CPUs)\n"
		"  -o, --output OUT             output of a single FILE ('-': standard output)\n"
		"      --no-checksum            no LZ4 block checksums (on by default; zstd and xz\n"
		"                               always have theirs)\n"
		"  -f, --force                  overwrite existing outputs\n"
		"  -u, --update                 keep outputs that are complete, valid and not older\n"
		"                               than their input; make the others again (resumes an\n"
		"                               interrupted -r)\n"
		"      --index-cache DIR        with --index: see above; FILE is left as it is\n"
		"      --gzip-span SIZE         plain gzip output between checkpoints, as the mount's\n"
		"                               -o gzip_span (default 1M; 64K-32M): must match it\n"
		"  -q, --quiet                  no progress line, no notes\n"
		"  -v, --verbose                one line per file\n"
		"  -h, --help                   this text\n"
		"  -V, --version                versions\n");
}

static int parse_uint(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "codec", required_argument, NULL, 'c' },
		{ "level", required_argument, NULL, 'l' },
		{ "block-size", required_argument, NULL, 'B' },
		{ "threads", required_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "recursive", no_argument, NULL, 'r' },
		{ "test", no_argument, NULL, 't' },
		{ "index", no_argument, NULL, OPT_INDEX },
		{ "no-checksum", no_argument, NULL, OPT_NO_CHECKSUM },
		{ "index-cache", required_argument, NULL, OPT_INDEX_CACHE },
		{ "gzip-span", required_argument, NULL, OPT_GZIP_SPAN },
		{ "force", no_argument, NULL, 'f' },
		{ "update", no_argument, NULL, 'u' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctx c = { .o = { .codec = PK_LZ4, .level = -1, .csum = true } };
	const char *level_s = NULL, *block_s = NULL, *icache_s = NULL, *span_s = NULL;
	bool recursive = false, test = false, index = false;
	long online = sysconf(_SC_NPROCESSORS_ONLN), v;
	int opt, rc = 0;

	c.o.threads = online > 0 ? (unsigned int)(online < MAX_THREADS ? online : MAX_THREADS) : 1;
	while ((opt = getopt_long(argc, argv, "c:l:B:j:o:rtfuqvhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (strcmp(optarg, "lz4") == 0)
				c.o.codec = PK_LZ4;
			else if (strcmp(optarg, "lz4hc") == 0)
				c.o.codec = PK_LZ4HC;
			else if (strcmp(optarg, "gzip") == 0 || strcmp(optarg, "bgzf") == 0)
				c.o.codec = PK_GZIP;
			else if (strcmp(optarg, "zstd") == 0)
				c.o.codec = PK_ZSTD;
			else if (strcmp(optarg, "xz") == 0)
				c.o.codec = PK_XZ;
			else {
				pk_err("-c %s: unknown codec (lz4, lz4hc, gzip, zstd or xz)",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'l':
			level_s = optarg;
			break;
		case 'B':
			block_s = optarg;
			break;
		case 'j':
			if (parse_uint(optarg, 1, MAX_THREADS, &v) < 0) {
				pk_err("-j %s: a thread count from 1 to %d", optarg, MAX_THREADS);
				return EXIT_USAGE;
			}
			c.o.threads = (unsigned int)v;
			break;
		case 'o':
			c.out = optarg;
			break;
		case 'r':
			recursive = true;
			break;
		case 't':
			test = true;
			break;
		case OPT_INDEX:
			index = true;
			break;
		case OPT_NO_CHECKSUM:
			c.o.csum = false;
			break;
		case OPT_INDEX_CACHE:
			icache_s = optarg;
			break;
		case OPT_GZIP_SPAN:
			span_s = optarg;
			break;
		case 'f':
			c.o.force = true;
			break;
		case 'u':
			c.o.update = true;
			break;
		case 'q':
			c.o.quiet = true;
			break;
		case 'v':
			c.o.verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("blockfs-pack %s\nliblz4 %s\nzlib %s\nlibzstd %s\nliblzma %s\n",
			       BFS_VERSION, LZ4_versionString(), zlibVersion(),
			       ZSTD_versionString(), lzma_version_string());
#if HAVE_LIBDEFLATE
			printf("libdeflate %s\n", LIBDEFLATE_VERSION_STRING);
#endif
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}

	/* Levels and block size, checked per codec. */
	{
		const struct codec_row *row = &codec_rows[c.o.codec];

		c.o.level = (int)row->def;
		if (level_s) {
			if (parse_uint(level_s, row->lo, row->hi, &v) < 0) {
				pk_err("-l %s: %s levels are %ld to %ld", level_s, row->name,
				       row->lo, row->hi);
				return EXIT_USAGE;
			}
			c.o.level = (int)v;
		}
		c.o.block = row->bdef;
		if (block_s) {
			uint64_t b;

			if (bfs_parse_size(block_s, &b) < 0 || b < PK_BLOCK_MIN || b > row->bmax) {
				if (c.o.codec == PK_GZIP)
					pk_err("-B %s: the block size is %uK to %u for gzip (a BGZF "
					       "member holds at most 65280 bytes)",
					       block_s, PK_BLOCK_MIN >> 10, row->bmax);
				else
					pk_err("-B %s: the block size is %uK to %uM for %s",
					       block_s, PK_BLOCK_MIN >> 10, row->bmax >> 20,
					       row->name);
				return EXIT_USAGE;
			}
			c.o.block = (uint32_t)b;
		}
	}
	c.ext = pk_codec_ext(c.o.codec);

	if (recursive + test + index > 1) {
		pk_err("-r, -t and --index do not go together");
		return EXIT_USAGE;
	}
	if (optind >= argc || (recursive && argc - optind != 2)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (c.out && (recursive || test || index || argc - optind != 1)) {
		pk_err("-o names the output of a single FILE");
		return EXIT_USAGE;
	}

	if ((icache_s && !index) || (span_s && !icache_s)) {
		pk_err("%s", icache_s && !index ? "--index-cache goes with --index" :
						  "--gzip-span goes with --index-cache");
		return EXIT_USAGE;
	}
	if (icache_s) {
		static struct bfs_codec_conf conf = { .gzip = true,
						      .gzip_span = BFS_GZIP_SPAN_DEFAULT };
		char err[PATH_MAX + 128];
		uint64_t b;

		if (span_s) {
			if (bfs_parse_size(span_s, &b) < 0 || b < BFS_GZIP_SPAN_MIN ||
			    b > BFS_GZIP_SPAN_MAX) {
				pk_err("--gzip-span %s: from %uK to %uM", span_s,
				       BFS_GZIP_SPAN_MIN >> 10, BFS_GZIP_SPAN_MAX >> 20);
				return EXIT_USAGE;
			}
			conf.gzip_span = (uint32_t)b;
		}
		c.o.codecs = &conf;
		if (bfs_icache_open(&c.o.icache, icache_s, err, sizeof(err)) < 0) {
			pk_err("%s", err);
			return 1;
		}
	}

	pk_output_init();

	if (test || index) {
		for (int i = optind; i < argc; i++)
			rc |= test ? pk_check_file(argv[i], &c.o) : pk_index_file(argv[i], &c.o);
		bfs_icache_free(c.o.icache);
		return rc ? 1 : 0;
	}

	c.w.o = &c.o;
	pk_progress_start(&c.w.prog, !c.o.quiet && isatty(STDERR_FILENO));
	if (pk_pool_new(&c.w.pool, &c.o) < 0) {
		pk_err("cannot start %u threads: out of memory", c.o.threads);
		return 1;
	}
	if (recursive) {
		rc = pack_tree(&c, argv[optind], argv[optind + 1]);
	} else {
		if (c.w.prog.on) {
			for (int i = optind; i < argc; i++) {
				struct stat st;

				if (strcmp(argv[i], "-") != 0 && stat(argv[i], &st) == 0 &&
				    S_ISREG(st.st_mode))
					c.w.prog.total += (uint64_t)st.st_size;
			}
		}
		for (int i = optind; i < argc && !c.w.stop; i++)
			rc |= pack_file(&c, argv[i]);
		pk_progress_clear();
	}
	pk_pool_free(c.w.pool);
	return rc ? 1 : 0;
}
