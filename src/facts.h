/* SPDX-License-Identifier: MIT */
/*
 * What is known about a backing file (facts.c): one place to ask for the
 * decoded size of a view under a backing change stamp, whichever holder
 * has it, and to hand it on to the others. Private to the mount's modules.
 */
#ifndef BLOCKFS_FACTS_H
#define BLOCKFS_FACTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "blockfs/common.h"

struct bfs_codec;
struct bfs_fs;
struct bfs_inode;
struct bfs_snap_ctx;

/*
 * The decoded size of the file @in shows under backing stamp @stamp, as
 * the inode remembers it (its memo, which its version sets when built):
 * true and *@size, or false when the memo is of another stamp or its
 * version refuses its opens (a misnamed file). No syscall.
 */
BFS_MUST_CHECK bool bfs_facts_inode_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp,
					 uint64_t *size);
/*
 * The decoded size the decoded file @in shows to a stat under backing
 * stamp @stamp, in one hold of its lock and with no syscall: true and
 * *@size from the version open readers hold (none count with
 * @kernel_open, the kernel's handles hold versions then), else from its
 * memo of @stamp, a misnamed file's too; false when neither has it, and
 * only a version built now can tell. An answer from the memo clears
 * in->kstale: it is the size READs will build from.
 */
BFS_MUST_CHECK bool bfs_facts_shown_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp,
					 bool kernel_open, uint64_t *size);
/*
 * Does @in know its decoded size under @stamp by its memo alone, with no
 * version built (none yet, or dropped when idle)? In one hold of its
 * lock, no syscall. An open may then go without a version.
 */
BFS_MUST_CHECK bool bfs_facts_memo_only(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp);
/*
 * The decoded size of entry @name of @sc's snapshot under @stamp, as a
 * lookup noted it there or the directory's memo (index cache) gave it:
 * true and *@size, else false. No syscall.
 */
BFS_MUST_CHECK bool bfs_facts_listed_size(struct bfs_snap_ctx *sc, const char *name, uint64_t stamp,
					  uint64_t *size);
/*
 * @in, which has no version under @stamp, shows @size bytes under it: its
 * memo says so from now on (nothing when it has a version, or a memo of
 * that stamp already).
 */
void bfs_facts_keep_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp, uint64_t size);
/*
 * Hand what @in knows under @stamp (bfs_facts_inode_size()) on to entry
 * @name of @sc's snapshot, and so to the directory's memo; nothing when
 * it knows nothing.
 */
void bfs_facts_share_size(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_snap_ctx *sc,
			  const char *name, uint64_t stamp);

/*
 * The inode of entry @name of the directory open as @dfd, shown with
 * @codec (none when it is not a regular file), found or added with one
 * more lookup, its stat in *@st taken from a descriptor opened now, which
 * the inode keeps (bfs_inode_get()): open for reading when @reg (the
 * caller knows @name as a regular file) and it can be, else O_PATH. Its
 * versions then need no open of their own.
 * Return: 0, or -errno from the open, fstat or bfs_inode_get().
 */
BFS_MUST_CHECK int bfs_facts_open_inode(struct bfs_fs *fs, int dfd, const char *name, bool reg,
					const struct bfs_codec *codec, struct stat *st,
					struct bfs_inode **out);

#endif
