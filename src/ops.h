/* SPDX-License-Identifier: MIT */
/* The FUSE low-level operations table; userdata is a struct bfs_fs. */
#ifndef BLOCKFS_OPS_H
#define BLOCKFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops bfs_ops;

/* The errno a reply carries for internal code @rc (<= 0). */
int bfs_kernel_errno(int rc);

/*
 * Hand @len decoded bytes at @off of FUSE inode @ino to the kernel's page
 * cache of session @ctx: notify_store with one buffer, which libfuse sends
 * without copying it (push.h). For workers only: never a READ's thread.
 */
int bfs_ops_push(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len);

#endif
