/* SPDX-License-Identifier: MIT */
/* The FUSE low-level operations table; userdata is a struct bfs_fs. */
#ifndef BLOCKFS_OPS_H
#define BLOCKFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops bfs_ops;

/* The errno a reply carries for internal code @rc (< 0). */
int bfs_kernel_errno(int rc);

#endif
