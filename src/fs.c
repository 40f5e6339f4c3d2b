// SPDX-License-Identifier: MIT
/*
 * The mount (contract in fs_i.h): one init and one destroy for everything
 * it shares, the cache, the counters, the hints, the inode table's root,
 * the mappings and the SIGBUS guard, the work queues and the hook that
 * pushes pages to the kernel; the parts it is made of (fs_i.h lists
 * them) are each set up and torn down here, in order.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/workq.h"
#include "fs_i.h"

int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts,
		struct fuse_session *se, bfs_push_fn push)
{
	struct stat st;
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->opts = opts;
	fs->se = se;
	fs->env.push = push;
	fs->env.push_ctx = fs;
	fs->env.reopen = bfs_backing_reopen_name;
	fs->env.reopen_ctx = fs;
	fs->env.readpath = opts->readpath;
	fs->env.verify = opts->verify;
	fs->env.readahead = opts->readahead;
	fs->env.kernel_readahead = opts->kernel_readahead;
	fs->env.advice = opts->advice;
	fs->env.codecs =
		(struct bfs_codec_conf){ .gzip = opts->gzip_index, .gzip_span = opts->gzip_span };
	fs->env.remote = !bfs_backing_is_local(source);
	if (fs->env.remote && opts->readpath == BFS_READPATH_MMAP)
		bfs_warn(
			"readpath=mmap on a remote SOURCE: a server that goes away makes reads "
			"of the mapping fail (SIGBUS, caught as EIO); readpath=auto would use pread");
	fs->root_fd = open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->root_fd < 0)
		return -errno;
	if (fstat(fs->root_fd, &st) < 0)
		goto out_close;
	errno = ENOMEM;
	fs->env.mount = bfs_counters_new(NULL);
	if (!fs->env.mount || bfs_cache_new(&fs->env.cache, opts->cache_size) < 0)
		goto out_close;
	if (bfs_inode_table_init(&fs->itab) < 0 || bfs_snap_cache_init(&fs->snaps) < 0 ||
	    bfs_inode_root_init(fs, &st) < 0) {
		errno = ENOMEM;
		goto out_close;
	}
	/*
	 * Mappings exist whatever the mount's read path: a file or directory
	 * hint may choose mmap on a pread mount.
	 */
	rc = bfs_sigbus_init();
	if (rc == 0)
		rc = bfs_maps_new(&fs->env.maps, BFS_MAX_LIVE_MAPS, opts->populate);
	if (rc < 0) {
		errno = -rc;
		goto out_close;
	}
	bfs_hints_init(&fs->hints);
	bfs_handles_init(&fs->handles);
	bfs_version_walks_init(&fs->walks);
	bfs_fdc_init(&fs->fdc, bfs_fdc_budget());
	bfs_rdplus_init(&fs->rdplus, opts->readdirplus_auto);
	return 0;

out_close:
	bfs_maps_free(fs->env.maps);
	bfs_cache_free(fs->env.cache);
	bfs_counters_put(fs->env.mount);
	bfs_inode_table_free(fs);
	bfs_snap_cache_free(fs);
	free(fs->root.rpath);
	close(fs->root_fd);
	return -errno;
}

/* Queued read-ahead jobs per worker: enough to keep a few streams fed. */
#define QUEUE_PER_WORKER 128

/*
 * Two pools of the same work queue. Decoding ahead of a reader runs at
 * nice 19: where it shares a core with a reader it gets about 1.5% of it,
 * so it uses what the readers leave idle, and a reader that catches up
 * sends a READ, served at normal priority, so nothing ever waits for it
 * (doc/decisions/0013-service-priority.md). Not the idle scheduling
 * class, which would do the same on an idle machine, but never run at all
 * beside a CPU-bound load, and read-ahead would never happen there. What
 * someone waits for or asked for (measuring at the first stat, helping a
 * READ decode, willneed, populate, dropping pages) runs at nice 10.
 */
#define WORKER_NICE 10
#define AHEAD_NICE  19

static void worker_start(void)
{
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), WORKER_NICE); /* a hint: may fail */
}

static void ahead_start(void)
{
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), AHEAD_NICE);
}

int bfs_fs_start(struct bfs_fs *fs)
{
	unsigned int n = fs->opts->workers;
	int rc;

	rc = bfs_trim_start(fs);
	if (rc < 0 || n == 0)
		return rc;
	rc = bfs_workq_new(&fs->env.workq, n, (size_t)n * QUEUE_PER_WORKER, worker_start);
	if (rc == 0)
		rc = bfs_workq_new(&fs->env.aheadq, n, (size_t)n * QUEUE_PER_WORKER, ahead_start);
	return rc;
}

void bfs_fs_destroy(struct bfs_fs *fs)
{
	bfs_handles_close_all(fs);
	bfs_trim_stop(fs);
	bfs_workq_free(fs->env.aheadq); /* then the jobs, which hold versions */
	bfs_workq_free(fs->env.workq);
	bfs_inode_table_free(fs);
	bfs_snap_cache_free(fs);
	free(fs->root.rpath);
	bfs_handles_destroy(&fs->handles);
	bfs_version_walks_destroy(&fs->walks);
	bfs_fdc_destroy(&fs->fdc);
	close(fs->root_fd);
	bfs_cache_free(fs->env.cache); /* after every version: no block is held */
	bfs_maps_free(fs->env.maps);   /* likewise: no mapping is left */
	bfs_icache_free(fs->env.icache);
	bfs_counters_put(fs->env.mount);
	bfs_hints_destroy(&fs->hints);
}
