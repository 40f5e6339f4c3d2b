/* SPDX-License-Identifier: MIT */
/*
 * How mount(8) starts blockfs (mount_helper.c): "mount.blockfs SOURCE DIR
 * -o OPTS" under the helper convention, or "blockfs SOURCE DIR -o OPTS"
 * from mount.fuse3, which appends options nobody asked for.
 */
#ifndef BLOCKFS_MOUNT_HELPER_H
#define BLOCKFS_MOUNT_HELPER_H

#include <fuse_opt.h>
#include <stdbool.h>

/**
 * bfs_helper_args() - the mount(8) helper convention: mount.blockfs SOURCE
 * DIR [-sfnv] [-o OPTS] [-t TYPE] [-N NS], made into blockfs's command line
 * in @out ("blockfs SOURCE DIR -o OPTS"). -f means "fake" there, not
 * "foreground"; -n, -s, -v, -t and -N are mount's business; options that
 * mean nothing to FUSE (fstab bookkeeping: defaults, noauto, user, _netdev,
 * x-*, comment=...) are dropped. "-h", "--help", "-V" and "--version" alone
 * pass through.
 * Return: 0, 1 for a fake mount (do nothing), -1 on a bad command line or
 * no memory. @out is the caller's to free in every case.
 */
int bfs_helper_args(int argc, char **argv, struct fuse_args *out);

/**
 * bfs_run_by_mount_fuse() - was this process started by mount.fuse3? It
 * runs "/bin/sh -c 'blockfs' 'SOURCE' ..." (every word quoted): that shell
 * is the parent when it forks (dash), mount(8) when it execs the command
 * (bash), and mount(8) runs blockfs under this name in no other way.
 */
bool bfs_run_by_mount_fuse(void);

/**
 * bfs_drop_mount_fuse_defaults() - cut the ",dev,suid" (or ",dev",
 * ",suid") that mount.fuse3 appended from the last -o of @argv, in place.
 * What is left of suid and dev was asked for.
 */
void bfs_drop_mount_fuse_defaults(int argc, char **argv);

#endif
