// SPDX-License-Identifier: MIT
/*
 * Fuzzes the command line parser, bfs_opts_parse(): libfuse's fuse_opt
 * with blockfs's -o table, then bfs_opts_check(), without mounting. The
 * input is the argument vector after "blockfs", one argument per line.
 *
 * Checks: it succeeds or fails (-1) without leaking (LeakSanitizer) or
 * touching memory it does not own; an accepted line gives values within
 * their limits, each equal to what its -o string says on its own, and
 * the canonical -o line rebuilt from the values parses to the same ones.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "blockfs/hints.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"
#include "fuzz.h"

#define MAX_ARGS 64

static void check_values(const struct bfs_opts *o)
{
	const char *workers = bfs_opts_given(o, "workers");
	const char *cache_size = bfs_opts_given(o, "cache_size");
	const char *readahead = bfs_opts_given(o, "readahead");
	uint64_t v;

	FZ_CHECK(bfs_readpath_name((int)o->readpath) != NULL);
	FZ_CHECK(o->workers <= BFS_MAX_WORKERS || !workers);
	FZ_CHECK(o->populate >= BFS_POPULATE_OFF && o->populate <= BFS_POPULATE_ASYNC);
	FZ_CHECK(bfs_advice_name(o->advice) != NULL && o->advice != BFS_ADV_DONTNEED);
	if (cache_size)
		FZ_CHECK(bfs_parse_size(cache_size, &v) == 0 && v == o->cache_size);
	if (readahead)
		FZ_CHECK(bfs_parse_size(readahead, &v) == 0 && v == o->readahead);
	if (workers)
		FZ_CHECK(strtoull(workers, NULL, 10) == o->workers);
}

/* Parse "blockfs -o OPTS src mnt"; 0 and @o filled, or -1. */
static int parse_line(const char *opts, struct bfs_opts *o)
{
	char *argv[] = { "blockfs", "-o", (char *)opts, "src", "mnt" };
	struct fuse_args args = FUSE_ARGS_INIT(5, argv);
	int rc = bfs_opts_parse(&args, o);

	fuse_opt_free_args(&args);
	return rc;
}

/* The values of @o as one -o line; parsing it must give them back. */
static void check_canonical(const struct bfs_opts *o)
{
	static const char *const populates[] = { "off", "on", "async" };
	char line[512], workers[32] = "";
	struct bfs_opts o2;

	/* the default count is the CPUs', which may exceed what -o accepts */
	if (bfs_opts_given(o, "workers"))
		snprintf(workers, sizeof(workers), ",workers=%u", o->workers);
	snprintf(line, sizeof(line),
		 "readpath=%s,populate=%s,advice=%s,cache_size=%" PRIu64 ",readahead=%" PRIu64
		 "%s,verify=%s",
		 bfs_readpath_name((int)o->readpath), populates[o->populate],
		 bfs_advice_name(o->advice), o->cache_size, o->readahead, workers,
		 o->verify ? "on" : "off");
	FZ_CHECK(parse_line(line, &o2) == 0);
	FZ_CHECK(o2.readpath == o->readpath && o2.populate == o->populate &&
		 o2.advice == o->advice && o2.cache_size == o->cache_size &&
		 o2.readahead == o->readahead && o2.workers == o->workers &&
		 o2.verify == o->verify);
	FZ_CHECK(o2.source && strcmp(o2.source, "src") == 0);
	bfs_opts_release(&o2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char *text = malloc(size + 1), *p, *nl;
	struct bfs_opts o;
	int rc;

	FZ_CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	FZ_CHECK(fuse_opt_add_arg(&args, "blockfs") == 0);
	for (p = text; args.argc < MAX_ARGS; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		FZ_CHECK(fuse_opt_add_arg(&args, p) == 0);
		if (!nl)
			break;
	}
	rc = bfs_opts_parse(&args, &o);
	FZ_CHECK(rc == 0 || rc == -1);
	if (rc == 0) {
		check_values(&o);
		check_canonical(&o);
	}
	bfs_opts_release(&o);
	fuse_opt_free_args(&args);
	free(text);
	return 0;
}
