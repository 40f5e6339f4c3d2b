/* SPDX-License-Identifier: MIT */
/*
 * This mount as the kernel lists it (mountinfo.c): its device number from
 * /proc/self/mountinfo, and the read-ahead of that device in sysfs.
 */
#ifndef BLOCKFS_MOUNTINFO_H
#define BLOCKFS_MOUNTINFO_H

#include <stdbool.h>
#include <stdint.h>

/**
 * bfs_mountinfo_line() - does @line, one line of /proc/self/mountinfo, list
 * a FUSE mount on @mnt? Then its device number in *@maj:*@min. The mount
 * point field escapes space, tab, newline and backslash as \ooo; @line is
 * unescaped in place.
 */
bool bfs_mountinfo_line(char *line, const char *mnt, unsigned int *maj, unsigned int *min);

/**
 * bfs_mount_dev() - the device number of the newest FUSE mount on @mnt (an
 * absolute, resolved path, as libfuse leaves it), from /proc/self/mountinfo.
 * Not stat(2): that would be a FUSE request to this daemon, which answers
 * none until its loop runs.
 * Return: 0, -ENOENT (no such mount), or -errno.
 */
int bfs_mount_dev(const char *mnt, unsigned int *maj, unsigned int *min);

/**
 * bfs_set_kernel_readahead() - the kernel's read-ahead into this mount, in
 * its backing device's read_ahead_kb (the FUSE default is 128 KiB whatever
 * max_readahead says: INIT can only lower it). Larger pipelines more
 * FUSE_READs ahead of a sequential reader
 * (doc/decisions/0001-kernel-readahead.md). Best effort: the mount works without it, so a failure
 * only warns. @found is what bfs_mount_dev() returned for @maj:@min;
 * @bytes 0 leaves the kernel's default.
 */
void bfs_set_kernel_readahead(int found, unsigned int maj, unsigned int min, uint64_t bytes);

/**
 * bfs_unmounted() - did the session loop end because device @maj:@min left
 * @mnt? Unmounted while requests were still queued (the RELEASEs of
 * thousands of files a process closed just before), the readers of
 * /dev/fuse get ECONNABORTED instead of ENODEV on recent kernels, and
 * libfuse ends its loop with that error. The mount gone from mountinfo is
 * what an unmount leaves; an abort through /sys/fs/fuse/connections
 * leaves it there (ENOTCONN to its users until unmounted), and stays an
 * error.
 */
bool bfs_unmounted(const char *mnt, unsigned int maj, unsigned int min);

#endif
