// SPDX-License-Identifier: MIT
/*
 * blockfs and mount.blockfs: parse options, open SOURCE, mount, run the
 * session loop, unwind. Nothing else lives here.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <lz4.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "blockfs/codec.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"
#include "fs_i.h"
#include "ops.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: blockfs [-f] [-d] [-s] [-o OPTIONS] SOURCE MOUNTPOINT\n"
		     "       mount.blockfs SOURCE MOUNTPOINT [-o OPTIONS]\n");
}

static void help(void)
{
	usage(stdout);
	printf("\nShows the LZ4, BGZF (and with -o gzip=index, gzip) files below SOURCE\n"
	       "decompressed, read-only.\n\n");
	bfs_opts_help(stdout);
	printf("\nFUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static void version(void)
{
	printf("blockfs %s\nlibfuse %s\nliblz4 %s\nzlib %s\n", BFS_VERSION, fuse_pkgversion(),
	       LZ4_versionString(), zlibVersion());
}

/* mount(8) options that mean nothing to FUSE: fstab and mount bookkeeping. */
static bool mount_only(const char *o, size_t len)
{
	static const char *const names[] = {
		"defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group",
		"_netdev", "nofail", "loop",
	};

	for (size_t i = 0; i < BFS_ARRAY_SIZE(names); i++)
		if (strlen(names[i]) == len && strncmp(o, names[i], len) == 0)
			return true;
	return (len >= 2 && strncmp(o, "x-", 2) == 0) ||
	       (len >= 8 && strncmp(o, "comment=", 8) == 0);
}

/*
 * The mount(8) helper convention: mount.blockfs SOURCE DIR [-sfnv] [-o OPTS]
 * [-t TYPE]. -f means "fake" there, not "foreground".
 * Return: 0, 1 for a fake mount (do nothing), -1 on a bad command line.
 */
static int helper_args(int argc, char **argv, struct fuse_args *out)
{
	char *kept = NULL;

	if (argc < 3)
		return -1;
	if (fuse_opt_add_arg(out, "blockfs") < 0 || fuse_opt_add_arg(out, argv[1]) < 0 ||
	    fuse_opt_add_arg(out, argv[2]) < 0)
		return -1;
	for (int i = 3; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-f") == 0)
			return 1;
		if (strcmp(a, "-n") == 0 || strcmp(a, "-s") == 0 || strcmp(a, "-v") == 0)
			continue;
		if ((strcmp(a, "-t") == 0 || strcmp(a, "-N") == 0) && i + 1 < argc) {
			i++;
			continue;
		}
		if (strcmp(a, "-o") != 0 || i + 1 >= argc)
			return -1;
		for (const char *o = argv[++i]; *o;) {
			size_t len = strcspn(o, ",");

			if (len && !mount_only(o, len)) {
				char *one = strndup(o, len);

				if (!one || fuse_opt_add_opt(&kept, one) < 0) {
					free(one);
					return -1;
				}
				free(one);
			}
			o += len + (o[len] == ',');
		}
	}
	if (kept && (fuse_opt_add_arg(out, "-o") < 0 || fuse_opt_add_arg(out, kept) < 0))
		return -1;
	free(kept);
	return 0;
}

/*
 * Each inode holds a descriptor, and each file version another, so a tree
 * stat'ed once pins two per file. Allow as many as the kernel does
 * (fs.nr_open) when we may raise the hard limit (root), else the hard
 * limit. Bounding them is better still; until then, this.
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
 * small ones come from the per-thread tcache. MALLOC_ARENA_MAX or
 * GLIBC_TUNABLES in the environment still decide.
 */
static void one_arena(void)
{
	const char *tun = getenv("GLIBC_TUNABLES");

	if (getenv("MALLOC_ARENA_MAX") || (tun && strstr(tun, "arena_max")))
		return;
	mallopt(M_ARENA_MAX, 1);
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
			 "descriptor in use would abort", dlerror());
}

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000	/* Linux 5.8 */
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
 * blockfs started twice). libfuse has already resolved @mnt (realpath), so
 * a missing one never gets here.
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
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': busy, something is "
			"mounted there already (unmount it, or give -o nonempty)\n", mnt);
		return -1;
	}
	rc = dir_has_entries(mnt);
	if (rc < 0)
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': cannot list it to "
			"check that it is empty: %s (give -o nonempty)\n", mnt, strerror(-rc));
	else if (rc > 0)
		fprintf(stderr, "blockfs: cannot mount on MOUNTPOINT '%s': not empty (give "
			"-o nonempty to mount over it anyway)\n", mnt);
	return rc == 0 ? 0 : -1;
}

/*
 * mount_dev() - the device number of the newest FUSE mount on @mnt (an
 * absolute, resolved path, as libfuse leaves it), from /proc/self/mountinfo.
 * Not stat(2): that would be a FUSE request to this daemon, which answers
 * none until its loop runs. The mount point field escapes space, tab,
 * newline and backslash as \ooo.
 * Return: 0, -ENOENT (no such mount), or -errno.
 */
static int mount_dev(const char *mnt, unsigned int *maj, unsigned int *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned int ma, mi;
		char *p, *q, *type;
		int at = 0;

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE ... */
		if (sscanf(line, "%*u %*u %u:%u %*s %n", &ma, &mi, &at) != 2 || at == 0)
			continue;
		type = strstr(line + at, " - ");
		if (!type || strncmp(type + 3, "fuse", 4) != 0)
			continue;
		/* Unescape the mount point in place: \ooo only ever shrinks. */
		for (p = q = line + at; *p && *p != ' '; q++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
			    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
				*q = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
				p += 4;
			} else {
				*q = *p++;
			}
		}
		*q = '\0';
		if (strcmp(line + at, mnt) == 0) {	/* the last match is the one on top */
			*maj = ma;
			*min = mi;
			rc = 0;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/*
 * set_kernel_readahead() - the kernel's read-ahead into this mount, in its
 * backing device's read_ahead_kb (the FUSE default is 128 KiB whatever
 * max_readahead says: INIT can only lower it). Larger pipelines more
 * FUSE_READs ahead of a sequential reader: md5sum ran at 0.85-0.95x the
 * plain file with 1M, 0.70-0.85x with 128K (README). Best effort: the
 * mount works without it, so a failure only warns.
 */
static void set_kernel_readahead(const char *mnt, uint64_t bytes)
{
	unsigned int maj = 0, min = 0;
	char path[64], val[24];
	int fd, len, rc;

	if (bytes == 0)
		return;			/* -o kernel_readahead=0: the kernel's own */
	rc = mount_dev(mnt, &maj, &min);
	if (rc < 0) {
		bfs_warn("cannot find this mount in /proc/self/mountinfo (%s): the kernel's "
			 "read-ahead stays at its default", strerror(-rc));
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	len = snprintf(val, sizeof(val), "%llu", (unsigned long long)(bytes >> 10));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	rc = fd < 0 ? -errno : write(fd, val, (size_t)len) == len ? 0 : -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		bfs_warn("cannot set %s to %s: %s; the kernel's read-ahead stays at its default",
			 path, val, strerror(-rc));
}

static int add_fsname(struct fuse_args *args, const char *source)
{
	char *opt = NULL, *name;
	int rc;

	for (int i = 0; i < args->argc; i++)
		if (strstr(args->argv[i], "fsname="))
			return 0;	/* the user chose one */
	if (asprintf(&name, "fsname=%s", source) < 0)
		return -1;
	rc = fuse_opt_add_opt_escaped(&opt, name);
	free(name);
	if (rc == 0)
		rc = fuse_opt_add_arg(args, "-o");
	if (rc == 0)
		rc = fuse_opt_add_arg(args, opt);
	free(opt);
	return rc;
}

static int run(struct fuse_session *se, const struct fuse_cmdline_opts *cl)
{
	struct fuse_loop_config *cfg;
	int rc;

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
	struct fuse_session *se;
	struct bfs_opts opts;
	struct bfs_fs fs;
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	int rc, status = 1;

	if (strcmp(prog, "mount.blockfs") == 0) {
		rc = helper_args(argc, argv, &args);
		if (rc != 0) {
			if (rc < 0)
				usage(stderr);
			fuse_opt_free_args(&args);
			return rc < 0;
		}
	} else {
		args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	}
	if (bfs_opts_parse(&args, &opts) < 0)
		goto out_opts;
	if (fuse_parse_cmdline(&args, &cl) != 0)
		goto out_opts;
	if (cl.show_help || cl.show_version) {
		cl.show_help ? help() : version();
		status = 0;
		goto out_opts;
	}
	if (!opts.source || !cl.mountpoint) {
		usage(stderr);
		goto out_opts;
	}
	if (check_source(opts.source) < 0 || check_mountpoint(cl.mountpoint, opts.nonempty) < 0)
		goto out_opts;
	raise_nofile();
	preload_unwinder();
	one_arena();
	bfs_codec_configure(&(struct bfs_codec_conf){ .gzip = opts.gzip_index,
						      .gzip_span = opts.gzip_span });
	rc = bfs_fs_init(&fs, opts.source, &opts);
	if (rc < 0) {
		fprintf(stderr, "blockfs: cannot open SOURCE '%s': %s\n", opts.source, strerror(-rc));
		goto out_opts;
	}
	/* A cache directory that cannot work is refused now, in the foreground. */
	if (opts.index_cache) {
		char err[512];

		if (bfs_icache_open(&fs.env.icache, opts.index_cache, err, sizeof(err)) < 0) {
			fprintf(stderr, "blockfs: %s\n", err);
			goto out_fs;
		}
	}
	/*
	 * Mappings exist whatever the mount's read path: a file or directory
	 * hint may choose mmap on a pread mount.
	 */
	fs.env.readpath = opts.readpath;
	if (bfs_sigbus_init() < 0 ||
	    bfs_maps_new(&fs.env.maps, BFS_MAX_LIVE_MAPS, opts.populate) < 0)
		goto out_fs;
	/*
	 * The daemon usually runs as root and opens backing files with its
	 * own rights: without the kernel checking the modes it shows, any
	 * user let in by allow_other could read any file below SOURCE.
	 */
	if (add_fsname(&args, opts.source) < 0 ||
	    fuse_opt_add_arg(&args, "-odefault_permissions") < 0)
		goto out_fs;
	se = fuse_session_new(&args, &bfs_ops, sizeof(bfs_ops), &fs);
	if (!se)
		goto out_fs;		/* libfuse said why */
	fs.se = se;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, cl.mountpoint) != 0)
		goto out_signals;
	set_kernel_readahead(cl.mountpoint, opts.kernel_readahead);
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	if (!cl.foreground)
		bfs_log_to_syslog(true);
	if (bfs_fs_start(&fs) < 0) {
		bfs_err("cannot start the read-ahead workers");
		goto out_unmount;
	}
	status = run(se, &cl) < 0;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	bfs_fs_destroy(&fs);
	bfs_maps_free(fs.env.maps);	/* after every file version is gone */
	bfs_icache_free(fs.env.icache);
out_opts:
	free(cl.mountpoint);
	bfs_opts_release(&opts);
	fuse_opt_free_args(&args);
	return status;
}
