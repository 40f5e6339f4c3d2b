// SPDX-License-Identifier: MIT
/*
 * blockfs and mount.blockfs: parse options, check SOURCE and the mount
 * point, set the process up (descriptor limit, malloc, unwinder), open
 * the index cache and the spill, mount, run the session loop, unwind.
 * mount(8)'s helper protocol is mount_helper.c's, the bdi and mountinfo
 * code mountinfo.c's.
 */
#include "config.h"

#include <bzlib.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <lz4.h>
#include <lzma.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"
#include "blockfs/spill.h"
#include "fs_i.h"
#include "loop.h"
#include "mount_helper.h"
#include "mountinfo.h"
#include "ops.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: blockfs [-f] [-d] [-s] [-o OPTIONS] SOURCE MOUNTPOINT\n"
		     "       mount.blockfs SOURCE MOUNTPOINT [-o OPTIONS]\n");
}

static void help(void)
{
	usage(stdout);
	printf("\nShows the LZ4, gzip (BGZF and plain), zstd, xz and bzip2 files below\n"
	       "SOURCE decompressed, read-only, under their names without the suffix.\n\n");
	bfs_opts_help(stdout);
	printf("\nFUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
	printf("    -o max_read=N          largest read request, in bytes (decimal)\n"
	       "    -o default_permissions is always on; every mount is nosuid,nodev\n"
	       "                           unless -o suid or -o dev\n");
}

static void version(void)
{
	printf("blockfs %s\nlibfuse %s\nliblz4 %s\nzlib %s\nlibzstd %s\nliblzma %s\n", BFS_VERSION,
	       fuse_pkgversion(), LZ4_versionString(), zlibVersion(), ZSTD_versionString(),
	       lzma_version_string());
	/* "1.0.8, 13-Jul-2019": the number is enough */
	printf("libbz2 %.*s\n", (int)strcspn(BZ2_bzlibVersion(), ","), BZ2_bzlibVersion());
}

/*
 * Inode descriptors are a bounded cache (fdcache.c: a quarter of the soft
 * limit) and file versions lease theirs, but every open file holds one:
 * allow as many as the kernel does (fs.nr_open) when we may raise the
 * hard limit (root), else the hard limit.
 */
static void raise_nofile(void)
{
	unsigned long long nr_open = 0;
	struct rlimit rl;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%llu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open > rl.rlim_max) {
		struct rlimit want = { .rlim_cur = nr_open, .rlim_max = nr_open };

		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			return;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * Decoded blocks are allocated by the thread that decodes them and freed
 * by whichever thread evicts them. With glibc's default of one malloc arena
 * per thread (up to eight per CPU) each arena keeps what is freed into it,
 * and under load resident memory grew to six times cache_size (load.sh,
 * 64 readers, 32 MiB cache: VmHWM 205 MiB; with one arena 110 MiB, at the
 * same throughput). One arena lets every thread reuse what any freed; the
 * large allocations, one per block decoded, are too few to contend, and
 * small ones come from the per-thread tcache.
 *
 * glibc also moves its mmap threshold up to the largest block freed (up
 * to 32 MiB) and keeps twice that free at the top of the heap: after an
 * xz block of 24 MiB or a zstd frame of 8 MiB had come and gone, tens of
 * MiB freed stayed resident, and 16 readers of zstd, xz and bzip2 files
 * went far past the bound of blockfs(8) (cache_size + 32 MiB + one
 * decoder window per stream being decoded). So both are fixed here:
 * blocks below MMAP_THRESHOLD (stock lz4's 4 MiB blocks, zstd's and xz's spans,
 * bzip2's blocks and decoders) come from the heap, whose pages the next
 * block reuses without a fault, as they did; anything bigger (xz
 * dictionaries, whole xz blocks and zstd frames, gzip spans) is mapped
 * and unmapped with its use; free memory over TRIM_MAX at the top of the
 * heap goes back at once. MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_,
 * MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES in the environment still decide.
 */
#define MMAP_THRESHOLD BFS_MAPPED_MIN
#define TRIM_MAX       (8u << 20)

static void malloc_settings(void)
{
	const char *tun = getenv("GLIBC_TUNABLES");

	if (!getenv("MALLOC_ARENA_MAX") && !(tun && strstr(tun, "arena_max")))
		mallopt(M_ARENA_MAX, 1);
	if (!getenv("MALLOC_MMAP_THRESHOLD_") && !(tun && strstr(tun, "mmap_threshold")))
		mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
	if (!getenv("MALLOC_TRIM_THRESHOLD_") && !(tun && strstr(tun, "trim_threshold")))
		mallopt(M_TRIM_THRESHOLD, TRIM_MAX);
}

/*
 * libfuse stops its worker threads with pthread_cancel(), for which glibc
 * loads libgcc_s on first use; a daemon that has run out of descriptors
 * by then cannot open it and glibc aborts. Load it now, while we can.
 */
static void preload_unwinder(void)
{
	if (!dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE))
		bfs_warn("cannot preload libgcc_s.so.1 (%s): unmounting with every "
			 "descriptor in use would abort",
			 dlerror());
}

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000 /* Linux 5.8 */
#endif

/*
 * SOURCE must be a directory this process may list and search. Checked
 * before anything is mounted: the O_PATH open that bfs_fs_init() needs
 * succeeds on a directory nobody may read, and the mount would then fail
 * every listing with EACCES.
 */
static int check_source(const char *source)
{
	struct stat st;
	int err = 0;

	if (stat(source, &st) < 0)
		err = errno;
	else if (!S_ISDIR(st.st_mode))
		err = ENOTDIR;
	else if (faccessat(AT_FDCWD, source, R_OK | X_OK, AT_EACCESS) < 0)
		err = errno;
	if (err)
		fprintf(stderr, "blockfs: cannot open SOURCE '%s': %s\n", source, strerror(err));
	return err ? -1 : 0;
}

/* Does directory @path hold anything but . and ..? -errno if it cannot be listed. */
static int dir_has_entries(const char *path)
{
	struct dirent *e;
	int rc = 0;
	DIR *d = opendir(path);

	if (!d)
		return -errno;
	while (rc == 0 && (errno = 0, e = readdir(d)))
		rc = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (rc == 0 && errno)
		rc = -errno;
	closedir(d);
	return rc;
}

/*
 * libfuse 3 mounts over anything; fuse 2 refused a non-empty directory
 * unless told -o nonempty, and so does blockfs, since files hidden under
 * a mount are easily mistaken for missing ones. The same goes for a
 * directory that is already a mount point (a live mount, most likely a
 * blockfs started twice). @mnt is resolved (resolve_mountpoint()), so a
 * missing one never gets here.
 */
static int check_mountpoint(const char *mnt, bool nonempty)
{
	struct statx stx;
	int rc;

	if (statx(AT_FDCWD, mnt, AT_STATX_SYNC_AS_STAT, STATX_TYPE, &stx) < 0) {
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': %s\n", mnt,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(stx.stx_mode)) {
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': %s\n", mnt,
			strerror(ENOTDIR));
		return -1;
	}
	if (nonempty)
		return 0;
	if (stx.stx_attributes_mask & stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) {
		fprintf(stderr,
			"blockfs: cannot mount on MOUNTPOINT '%s': busy, something is "
			"mounted there already (unmount it, or give -o nonempty)\n",
			mnt);
		return -1;
	}
	rc = dir_has_entries(mnt);
	if (rc < 0)
		fprintf(stderr,
			"blockfs: cannot mount on MOUNTPOINT '%s': cannot list it to "
			"check that it is empty: %s (give -o nonempty)\n",
			mnt, strerror(-rc));
	else if (rc > 0)
		fprintf(stderr,
			"blockfs: cannot mount on MOUNTPOINT '%s': not empty (give "
			"-o nonempty to mount over it anyway)\n",
			mnt);
	return rc == 0 ? 0 : -1;
}

/*
 * MOUNTPOINT as an absolute path without links, as libfuse would have
 * made it (the daemon's working directory changes; the mount table wants
 * one name), into *@out (malloc'd).
 */
static int resolve_mountpoint(const char *given, char **out)
{
	*out = realpath(given, NULL);
	if (!*out) {
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': %s\n", given,
			strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * A MOUNTPOINT inside SOURCE, or SOURCE itself, is refused: the daemon
 * would list and open its own mount through SOURCE, hold descriptors
 * inside it, so that fusermount3 -u is EBUSY for ever and, after -uz, the
 * daemon never exits. Compared by identity, MOUNTPOINT's and each of its
 * ancestors' with SOURCE's, so that another path to SOURCE (a bind mount,
 * a link) is caught too. @mnt: resolved (resolve_mountpoint()).
 */
static int check_outside(const char *source, const char *mnt)
{
	struct stat src, st;
	char *p = strdup(mnt), *slash;
	int rc = 0;

	if (!p || stat(source, &src) < 0) {
		free(p);
		return 0; /* check_source() has looked at SOURCE; nothing to compare */
	}
	for (;;) {
		if (stat(p, &st) == 0 && st.st_dev == src.st_dev && st.st_ino == src.st_ino) {
			fprintf(stderr,
				"blockfs: cannot mount on MOUNTPOINT '%s': %s SOURCE '%s' "
				"(blockfs would hold its own mount busy); choose a directory "
				"outside SOURCE\n",
				mnt, strcmp(p, mnt) == 0 ? "it is" : "it is inside", source);
			rc = -1;
			break;
		}
		slash = strrchr(p, '/');
		if (!slash || slash == p) {
			if (strcmp(p, "/") == 0 || !slash)
				break;
			p[1] = '\0'; /* "/x": the root is the last to check */
			continue;
		}
		*slash = '\0';
	}
	free(p);
	return rc;
}

/*
 * The index cache: -o index_cache=DIR, refused now, in the foreground,
 * when it cannot work; by default $XDG_CACHE_HOME/blockfs or
 * ~/.cache/blockfs, which when it cannot work leaves the mount without
 * one and says why. Return: 0, or -1 when the mount must stop.
 */
static int open_index_cache(const struct bfs_opts *o, struct bfs_icache **out)
{
	char err[512], *dir = NULL;
	int rc;

	if (o->index_cache_off)
		return 0;
	if (o->index_cache) {
		if (bfs_icache_open(out, o->index_cache, err, sizeof(err)) < 0) {
			fprintf(stderr, "blockfs: %s\n", err);
			return -1;
		}
	} else {
		rc = bfs_icache_default_dir(&dir, err, sizeof(err));
		if (rc > 0) {
			bfs_dbg("no index cache: %s", err);
			return 0;
		}
		if (rc == 0)
			rc = bfs_icache_open(out, dir, err, sizeof(err));
		free(dir);
		if (rc < 0) {
			fprintf(stderr,
				"blockfs: no index cache: %s (-o index_cache=off says "
				"none is wanted)\n",
				err);
			return 0;
		}
	}
	bfs_icache_set_limit(*out, o->index_cache_size);
	return 0;
}

/*
 * The spill (spill.h): unlinked files in the index cache's directory,
 * local to the daemon's user and private; without an index cache in
 * $TMPDIR, else /var/tmp (which, unlike /tmp, is seldom memory). A
 * directory that cannot be opened leaves the mount without a spill: it
 * is a shortcut, never needed.
 */
static void open_spill(const struct bfs_opts *o, const struct bfs_icache *icache)
{
	const char *tmp = getenv("TMPDIR"), *dir;
	int rc;

	if (o->spill_size == 0)
		return;
	dir = icache ? bfs_icache_dir(icache) : tmp && tmp[0] == '/' ? tmp : "/var/tmp";
	rc = bfs_spill_configure(dir, o->spill_size);
	if (rc < 0)
		fprintf(stderr,
			"blockfs: no spill in '%s': %s (-o spill_size=0 says none is "
			"wanted)\n",
			dir, strerror(-rc));
}

/* Add -o @key@value unless the command line has @key already (the user chose). */
static int add_unless_given(struct fuse_args *args, const char *key, const char *value)
{
	char *opt = NULL, *kv;
	int rc;

	for (int i = 0; i < args->argc; i++)
		if (strstr(args->argv[i], key))
			return 0;
	if (asprintf(&kv, "%s%s", key, value) < 0)
		return -1;
	rc = fuse_opt_add_opt_escaped(&opt, kv);
	free(kv);
	if (rc == 0)
		rc = fuse_opt_add_arg(args, "-o");
	if (rc == 0)
		rc = fuse_opt_add_arg(args, opt);
	free(opt);
	return rc;
}

/*
 * The mount table shows SOURCE, and the type fuse.blockfs whatever name
 * the binary was run under (libfuse would take it from argv[0]):
 * blockfs-stat tells a blockfs mount by that type.
 */
static int add_names(struct fuse_args *args, const char *source)
{
	if (add_unless_given(args, "fsname=", source) < 0)
		return -1;
	return add_unless_given(args, "subtype=", "blockfs");
}

/* bfs_loop_conf.on_stop: no push or invalidation may wait on READs nobody answers. */
static void quiesce(void *fs)
{
	bfs_gate_shut(&((struct bfs_fs *)fs)->notify, "notifications to the kernel");
}

static int run(struct fuse_session *se, const struct fuse_cmdline_opts *cl,
	       const struct bfs_opts *o, struct bfs_fs *fs)
{
	struct fuse_loop_config *cfg;
	int rc;

	if (!o->libfuse_loop) {
		/* -s: one thread, which answers everything itself */
		struct bfs_loop_conf lc = {
			.max_threads = cl->singlethread		   ? 1 :
				       cl->max_threads != UINT_MAX ? cl->max_threads :
								     BFS_LOOP_MAX_THREADS,
			.busy_poll_us = o->busy_poll_us,
			.remote = fs->env.remote,
			.on_stop = quiesce,
			.stop_arg = fs,
		};

		return bfs_loop_run(se, &lc);
	}
	if (cl->singlethread)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, (unsigned int)cl->clone_fd);
	/* libfuse marks a limit the user did not give as UINT_MAX. */
	if (cl->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(cfg, cl->max_idle_threads);
	if (cl->max_threads != UINT_MAX)
		fuse_loop_cfg_set_max_threads(cfg, cl->max_threads);
	rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts cl = { 0 };
	struct fuse_session *se = NULL;
	struct bfs_opts opts;
	struct bfs_fs fs;
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	char *mnt = NULL;
	bool fs_up = false;
	unsigned int maj = 0, min = 0;
	int rc, found = -ENOENT, status = 1;

	if (strcmp(prog, "mount.blockfs") == 0 || strcmp(prog, "mount.fuse.blockfs") == 0) {
		rc = bfs_helper_args(argc, argv, &args);
		if (rc != 0) {
			if (rc < 0)
				usage(stderr);
			fuse_opt_free_args(&args);
			return rc < 0;
		}
	} else {
		if (bfs_run_by_mount_fuse())
			bfs_drop_mount_fuse_defaults(argc, argv);
		args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	}
	if (bfs_opts_parse(&args, &opts) < 0)
		goto out_opts;
	/* Before fuse_parse_cmdline(), which adds a subtype from argv[0] when none is given. */
	if (opts.source && add_names(&args, opts.source) < 0)
		goto out_opts;
	if (fuse_parse_cmdline(&args, &cl) != 0)
		goto out_opts;
	if (cl.show_help || cl.show_version) {
		cl.show_help ? help() : version();
		status = 0;
		goto out_opts;
	}
	if (!opts.source || !opts.mountpoint) {
		usage(stderr);
		goto out_opts;
	}
	/* -d: libfuse prints every request; blockfs says what it decides (bfs_dbg) */
	if (cl.debug)
		bfs_log_set_level(LOG_DEBUG);
	/*
	 * The daemon usually runs as root and opens backing files with its
	 * own rights: without the kernel checking the modes it shows, any
	 * user let in by allow_other could read any file below SOURCE.
	 */
	if (fuse_opt_add_arg(&args, "-odefault_permissions") < 0 ||
	    (opts.suid && fuse_opt_add_arg(&args, "-osuid") < 0) ||
	    (opts.dev && fuse_opt_add_arg(&args, "-odev") < 0))
		goto out_opts;
	/*
	 * The session first: it is where libfuse checks the rest of the
	 * options, and a bad option is reported before any path is looked at.
	 */
	se = fuse_session_new(&args, &bfs_ops, sizeof(bfs_ops), &fs);
	if (!se)
		goto out_opts; /* libfuse said why */
	if (check_source(opts.source) < 0 || resolve_mountpoint(opts.mountpoint, &mnt) < 0 ||
	    check_outside(opts.source, mnt) < 0 || check_mountpoint(mnt, opts.nonempty) < 0)
		goto out_session;
	raise_nofile();
	preload_unwinder();
	malloc_settings();
	/* A spill write past RLIMIT_FSIZE fails with EFBIG (the spill is dropped) rather than killing the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	rc = bfs_fs_init(&fs, opts.source, &opts, se, bfs_ops_push);
	if (rc < 0) {
		fprintf(stderr, "blockfs: cannot open SOURCE '%s': %s\n", opts.source,
			strerror(-rc));
		goto out_session;
	}
	fs_up = true;
	if (open_index_cache(&opts, &fs.env.icache) < 0)
		goto out_session;
	open_spill(&opts, fs.env.icache);
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mnt) != 0)
		goto out_signals;
	found = bfs_mount_dev(mnt, &maj, &min);
	bfs_set_kernel_readahead(found, maj, min, opts.kernel_readahead);
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	if (!cl.foreground)
		bfs_log_to_syslog(true);
	if (bfs_fs_start(&fs) < 0) {
		bfs_err("cannot start the read-ahead workers");
		goto out_unmount;
	}
	rc = run(se, &cl, &opts, &fs);
	/*
	 * The loops reset the session on their way out. Marked as ended, a
	 * push a read-ahead worker is still making fails quietly: libfuse
	 * logs a failed write to /dev/fuse ("Bad file descriptor" once it is
	 * closed) only while the session runs.
	 */
	fuse_session_exit(se);
	if (rc == -ECONNABORTED && found == 0 && bfs_unmounted(mnt, maj, min)) {
		bfs_info("unmounted while requests were still queued: a clean exit");
		rc = 0;
	}
	status = rc < 0;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	if (fs_up) {
		/*
		 * Workers and the trim thread notify the kernel through the
		 * session: no more once it is destroyed. On an unmount the
		 * kernel has let go and what is in flight fails at once; on a
		 * signal our loop has already waited while answering READs.
		 */
		quiesce(&fs);
		bfs_trim_stop(&fs);
	}
	/* Before the fs: no request may come once it is gone. */
	fuse_session_destroy(se);
	if (fs_up)
		bfs_fs_destroy(&fs);
	bfs_spill_shutdown();
out_opts:
	free(mnt);
	free(cl.mountpoint);
	bfs_opts_release(&opts);
	fuse_opt_free_args(&args);
	return status;
}
