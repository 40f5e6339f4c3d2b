// SPDX-License-Identifier: MIT
/*
 * blockfs-microbench: the read strategies of blockfs(8) (readpath, populate,
 * advice) on one backing file, outside FUSE. It builds the block index
 * through the core as a mount's first stat does (probe, scan, measure the
 * sizes the file does not state, settle; the first two steps are timed
 * and reported), then decodes every block in
 * sequential and in shuffled order, getting the compressed bytes by:
 *
 *   pread          one pread(2) per block into a reused buffer
 *   mmap           one persistent mapping of the whole file, no populate
 *   mmap+populate  the same with MAP_POPULATE
 *   ...+adv=X      with madvise(X) on the whole mapping first
 *   mmap-per-block mmap(2) + munmap(2) around every block (the anti-pattern)
 *   memory         all compressed bytes already in malloc'd memory: decode only
 *
 * It counts the syscalls it makes itself and reads minor faults from
 * getrusage(2). Each strategy runs --reps times, interleaved, and reports
 * the median. The mapping is set up and torn down inside the timed region,
 * because that is what a reader pays.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/io.h"

#define MAX_REPS 64

enum order { SEQ, RND };

struct strategy {
	const char *name;
	int kind;     /* K_* */
	int populate; /* MAP_POPULATE */
	int advice;   /* MADV_* or -1 for none */
};

enum { K_PREAD, K_MMAP, K_PERBLOCK, K_MEMORY };

static const struct strategy strategies[] = {
	{ "pread", K_PREAD, 0, -1 },
	{ "mmap", K_MMAP, 0, -1 },
	{ "mmap+adv=sequential", K_MMAP, 0, MADV_SEQUENTIAL },
	{ "mmap+adv=random", K_MMAP, 0, MADV_RANDOM },
	{ "mmap+populate", K_MMAP, 1, -1 },
	{ "mmap+populate+adv=sequential", K_MMAP, 1, MADV_SEQUENTIAL },
	{ "mmap+populate+adv=random", K_MMAP, 1, MADV_RANDOM },
	{ "mmap-per-block", K_PERBLOCK, 0, -1 },
	{ "memory", K_MEMORY, 0, -1 },
};

struct result {
	double ns; /* whole pass */
	unsigned long long syscalls;
	long minflt, majflt;
};

struct bench {
	int fd;
	uint64_t fsize;
	const struct bfs_codec *codec;
	struct bfs_index idx;
	size_t *order[2]; /* block numbers, sequential and shuffled */
	uint8_t *cbuf, *dst;
	size_t ccap;
	uint8_t *mem; /* K_MEMORY: the whole file */
	long page;
	int verify;
	unsigned long long sink; /* keeps decodes observable */
	double scan_ns, size_ns; /* building the index, as a mount's first stat does */
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void faults(long *minflt, long *majflt)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*minflt = ru.ru_minflt;
	*majflt = ru.ru_majflt;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "blockfs-microbench: %s: %s\n", what, strerror(err));
	exit(1);
}

static void decode(struct bench *b, size_t k, const uint8_t *src)
{
	const struct bfs_blk *blk = &b->idx.blk[k];
	const char *why = "?";

	if (b->codec->decode(&b->idx, k, src, b->dst, blk->usize, b->verify, &why) < 0) {
		fprintf(stderr, "blockfs-microbench: block %zu: %s\n", k, why);
		exit(1);
	}
	b->sink += b->dst[0] + b->dst[blk->usize - 1];
}

/* One pass over every block in @ord with strategy @s. */
static struct result run(struct bench *b, const struct strategy *s, const size_t *ord)
{
	struct result r = { 0 };
	long f0, m0, f1, m1;
	uint8_t *map = NULL;
	size_t n = b->idx.n;
	double t0;

	faults(&f0, &m0);
	t0 = now_ns();
	switch (s->kind) {
	case K_PREAD:
		for (size_t i = 0; i < n; i++) {
			const struct bfs_blk *blk = &b->idx.blk[ord[i]];
			size_t got = 0;

			while (got < blk->clen) {
				ssize_t m = pread(b->fd, b->cbuf + got, blk->clen - got,
						  (off_t)(blk->coff + got));

				r.syscalls++;
				if (m <= 0)
					die("pread", m < 0 ? errno : EIO);
				got += (size_t)m;
			}
			decode(b, ord[i], b->cbuf);
		}
		break;
	case K_MMAP:
		map = mmap(NULL, b->fsize, PROT_READ, MAP_SHARED | (s->populate ? MAP_POPULATE : 0),
			   b->fd, 0);
		r.syscalls++;
		if (map == MAP_FAILED)
			die("mmap", errno);
		if (s->advice >= 0) {
			r.syscalls++;
			if (madvise(map, b->fsize, s->advice) < 0)
				die("madvise", errno);
		}
		for (size_t i = 0; i < n; i++)
			decode(b, ord[i], map + b->idx.blk[ord[i]].coff);
		munmap(map, b->fsize);
		r.syscalls++;
		break;
	case K_PERBLOCK:
		for (size_t i = 0; i < n; i++) {
			const struct bfs_blk *blk = &b->idx.blk[ord[i]];
			uint64_t start = blk->coff & ~(uint64_t)(b->page - 1);
			size_t len = (size_t)(blk->coff + blk->clen - start);

			map = mmap(NULL, len, PROT_READ, MAP_SHARED, b->fd, (off_t)start);
			if (map == MAP_FAILED)
				die("mmap", errno);
			decode(b, ord[i], map + (blk->coff - start));
			munmap(map, len);
			r.syscalls += 2;
		}
		break;
	case K_MEMORY:
		for (size_t i = 0; i < n; i++)
			decode(b, ord[i], b->mem + b->idx.blk[ord[i]].coff);
		break;
	}
	r.ns = now_ns() - t0;
	faults(&f1, &m1);
	r.minflt = f1 - f0;
	r.majflt = m1 - m0;
	return r;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* xorshift64*: a fixed seed, so every run shuffles alike. */
static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void load(struct bench *b, const char *path)
{
	uint8_t head[BFS_PROBE_LEN];
	struct bfs_io io, side_io, *sidep = NULL;
	struct stat st;
	double t0;
	ssize_t n;
	int side = -1, rc;

	b->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (b->fd < 0 || fstat(b->fd, &st) < 0)
		die(path, errno);
	b->fsize = (uint64_t)st.st_size;
	n = pread(b->fd, head, sizeof(head), 0);
	b->codec = n > 0 ? bfs_codec_probe(NULL, head, (size_t)n) : NULL;
	if (!b->codec) {
		fprintf(stderr, "blockfs-microbench: %s: not a format blockfs decodes\n", path);
		exit(1);
	}
	if (b->codec->sidecar) {
		char *sp;

		if (asprintf(&sp, "%s%s", path, b->codec->sidecar) < 0)
			die("asprintf", ENOMEM);
		side = open(sp, O_RDONLY | O_CLOEXEC);
		free(sp);
		if (side >= 0 && fstat(side, &st) == 0) {
			bfs_io_init_fd(&side_io, side, (uint64_t)st.st_size);
			sidep = &side_io;
		}
	}
	bfs_io_init_fd(&io, b->fd, b->fsize);
	bfs_index_init(&b->idx, b->fsize);
	t0 = now_ns();
	rc = b->codec->scan(&io, sidep, &b->idx);
	b->scan_ns = now_ns() - t0;
	if (side >= 0)
		close(side);
	if (rc < 0)
		die("scan", -rc);
	/* sizes the file does not state, on this thread alone (a mount spreads them on its workers) */
	t0 = now_ns();
	rc = bfs_measure(&b->idx, &io, b->codec, NULL);
	b->size_ns = now_ns() - t0;
	if (rc < 0)
		die("measure", -rc);
	rc = bfs_settle(&b->idx, &io, b->codec, UINT64_MAX);
	if (rc < 0 || b->idx.broken)
		die("settle", rc < 0 ? -rc : EBADMSG);

	b->ccap = 0;
	for (size_t k = 0; k < b->idx.n; k++)
		if (b->idx.blk[k].clen > b->ccap)
			b->ccap = b->idx.blk[k].clen;
	b->cbuf = malloc(b->ccap ? b->ccap : 1);
	b->dst = malloc(b->idx.max_usize ? b->idx.max_usize : 1);
	if (!b->cbuf || !b->dst)
		die("malloc", ENOMEM);
	/* Touch the buffers once so no strategy pays their first faults. */
	memset(b->cbuf, 0, b->ccap);
	memset(b->dst, 0, b->idx.max_usize);
}

static void make_orders(struct bench *b)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t n = b->idx.n;

	for (int o = 0; o < 2; o++) {
		b->order[o] = malloc(n * sizeof(size_t));
		if (!b->order[o])
			die("malloc", ENOMEM);
		for (size_t i = 0; i < n; i++)
			b->order[o][i] = i;
	}
	for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
		size_t j = (size_t)(rnd_next(&seed) % i), t = b->order[RND][i - 1];

		b->order[RND][i - 1] = b->order[RND][j];
		b->order[RND][j] = t;
	}
}

static void load_memory(struct bench *b)
{
	size_t got = 0;

	b->mem = malloc(b->fsize ? b->fsize : 1);
	if (!b->mem)
		die("malloc", ENOMEM);
	while (got < b->fsize) {
		ssize_t m = pread(b->fd, b->mem + got, b->fsize - got, (off_t)got);

		if (m <= 0)
			die("pread", m < 0 ? errno : EIO);
		got += (size_t)m;
	}
}

static void usage(FILE *to)
{
	fprintf(to, "usage: blockfs-microbench [-r REPS] [-s NAME[,NAME..]] [-o seq|random|both]\n"
		    "                          [--no-verify] [--tsv] FILE\n"
		    "Decode every block of FILE (.lz4 or BGZF) with each read strategy.\n"
		    "Strategies:");
	for (size_t i = 0; i < BFS_ARRAY_SIZE(strategies); i++)
		fprintf(to, " %s", strategies[i].name);
	fprintf(to, "\n");
}

static bool selected(const char *list, const char *name)
{
	size_t len = strlen(name);

	if (!list)
		return true;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == len && strncmp(p, name, len) == 0)
			return true;
		p += l + (e ? 1 : 0);
	}
	return false;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "strategies", required_argument, NULL, 's' },
		{ "order", required_argument, NULL, 'o' },
		{ "no-verify", no_argument, NULL, 'V' },
		{ "tsv", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b = { .verify = 1 };
	const char *only = NULL, *orders = "both";
	int reps = 5, tsv = 0, c;
	size_t ns = BFS_ARRAY_SIZE(strategies);
	static struct result res[BFS_ARRAY_SIZE(strategies)][2][MAX_REPS];
	uint64_t csize = 0;

	while ((c = getopt_long(argc, argv, "r:s:o:th", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			reps = atoi(optarg);
			if (reps < 1 || reps > MAX_REPS) {
				fprintf(stderr, "blockfs-microbench: --reps: 1..%d\n", MAX_REPS);
				return 2;
			}
			break;
		case 's':
			only = optarg;
			break;
		case 'o':
			orders = optarg;
			break;
		case 'V':
			b.verify = 0;
			break;
		case 't':
			tsv = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	b.page = sysconf(_SC_PAGESIZE);
	load(&b, argv[optind]);
	make_orders(&b);
	for (size_t k = 0; k < b.idx.n; k++)
		csize += b.idx.blk[k].clen;
	if (selected(only, "memory"))
		load_memory(&b);

	/* One untimed pass warms the backing file in the page cache. */
	(void)run(&b, &strategies[0], b.order[SEQ]);

	/* Interleaved: rep 1 of every strategy, then rep 2, ... */
	for (int r = 0; r < reps; r++)
		for (int o = 0; o < 2; o++) {
			if ((o == SEQ && !strcmp(orders, "random")) ||
			    (o == RND && !strcmp(orders, "seq")))
				continue;
			for (size_t s = 0; s < ns; s++)
				if (selected(only, strategies[s].name))
					res[s][o][r] = run(&b, &strategies[s], b.order[o]);
		}

	if (tsv)
		printf("strategy\torder\tblocks\tns_per_block\tns_min\tns_max\tMBps\t"
		       "syscalls_per_block\tminflt_per_block\tmajflt\n");
	else
		printf("%s: %s, %zu blocks, %.1f KiB mean compressed, %.1f KiB max "
		       "decompressed, %llu MiB decompressed, verify %s, %d reps (median)\n"
		       "index: scan %.1f ms, sizes measured %.1f ms (one thread, file cached)\n"
		       "%-30s %-6s %12s %10s %10s %12s %12s\n",
		       argv[optind], b.codec->name, b.idx.n,
		       b.idx.n ? (double)csize / (double)b.idx.n / 1024 : 0,
		       (double)b.idx.max_usize / 1024, (unsigned long long)(b.idx.usize >> 20),
		       b.verify ? "on" : "off", reps, b.scan_ns / 1e6, b.size_ns / 1e6, "strategy",
		       "order", "ns/block", "spread", "MB/s", "syscalls/blk", "minflt/blk");
	for (int o = 0; o < 2; o++)
		for (size_t s = 0; s < ns; s++) {
			double v[MAX_REPS], lo, hi, med, nb = (double)(b.idx.n ? b.idx.n : 1);
			struct result *rr = res[s][o];

			if (!selected(only, strategies[s].name) ||
			    (o == SEQ && !strcmp(orders, "random")) ||
			    (o == RND && !strcmp(orders, "seq")))
				continue;
			for (int r = 0; r < reps; r++)
				v[r] = rr[r].ns;
			med = median(v, reps);
			lo = v[0];
			hi = v[reps - 1];
			if (tsv)
				printf("%s\t%s\t%zu\t%.0f\t%.0f\t%.0f\t%.1f\t%.3f\t%.3f\t%ld\n",
				       strategies[s].name, o == SEQ ? "seq" : "random", b.idx.n,
				       med / nb, lo / nb, hi / nb,
				       (double)b.idx.usize / (med / 1e9) / 1e6,
				       (double)rr[reps - 1].syscalls / nb,
				       (double)rr[reps - 1].minflt / nb, rr[reps - 1].majflt);
			else
				printf("%-30s %-6s %12.0f %9.1f%% %10.1f %12.3f %12.3f\n",
				       strategies[s].name, o == SEQ ? "seq" : "random", med / nb,
				       med > 0 ? (hi - lo) / med * 100 : 0,
				       (double)b.idx.usize / (med / 1e9) / 1e6,
				       (double)rr[reps - 1].syscalls / nb,
				       (double)rr[reps - 1].minflt / nb);
		}
	if (b.sink == 42) /* never true in practice; keeps the decodes alive */
		fputc('\n', stderr);
	free(b.mem);
	free(b.cbuf);
	free(b.dst);
	free(b.order[0]);
	free(b.order[1]);
	bfs_index_destroy(&b.idx);
	close(b.fd);
	return 0;
}
