/* SPDX-License-Identifier: MIT */
/*
 * The index cache (-o index_cache=DIR): block indexes that a walk of a
 * backing file discovered, kept in DIR across mounts, so that the next
 * mount opens the same file version with a few reads instead of walking
 * it again. "icache" for short. Knows files, bytes and codecs; nothing
 * of FUSE or of the block cache.
 *
 * One entry per backing file, named by its device and inode number, and
 * holding the file's whole identity (device, inode, size, mtime, ctime,
 * nanoseconds included), the codec's name and the format version. An
 * entry that does not match the file exactly, or fails any check, is
 * ignored and the file walked (and its entry rewritten). Entry layout,
 * all little-endian (man 5 blockfs):
 *
 *   0    8  magic "BFSINDEX"
 *   8    4  version                  1
 *   12   4  header length            128
 *   16   16 codec name               "lz4", "bgzf", "gzip"; NUL-padded
 *   32   8  st_dev                   identity of the backing file ...
 *   40   8  st_ino
 *   48   8  st_size
 *   56   8  mtime seconds            (signed)
 *   64   8  mtime nanoseconds
 *   72   8  ctime seconds            (signed)
 *   80   8  ctime nanoseconds        ... all must match
 *   88   8  block count n            1 .. the file's size / 4 + 1
 *   96   8  decompressed bytes       the sum of the blocks' sizes
 *   104  4  block size               nominal, as user.blockfs.block_size
 *   108  4  bytes per block entry   24
 *   112  8  codec-private bytes p
 *   120  8  reserved                 0
 *   128  n x 24 blocks, in file order:
 *        +0 8 coff  +8 4 clen  +12 4 usize  +16 4 flags  +20 4 aux
 *   ...  p  codec-private bytes (gzip: checkpoints and windows)
 *   end  4  XXH32 (seed 0) of every byte before it
 *
 * The checksum catches damage; the checks after it (order, bounds, the
 * format's limits) catch an entry that is well formed yet wrong. Sizes
 * an entry states are trusted as a seek table's are: an odd one is
 * measured before it places a later block (the codec's cache_load).
 */
#ifndef BLOCKFS_INDEX_CACHE_H
#define BLOCKFS_INDEX_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "blockfs/common.h"

struct bfs_codec;
struct bfs_index;
struct bfs_icache;

#define BFS_ICACHE_MAGIC     "BFSINDEX"
#define BFS_ICACHE_VERSION   1u
#define BFS_ICACHE_HDR_LEN   128
#define BFS_ICACHE_ENTRY_LEN 24
#define BFS_ICACHE_CSUM_LEN  4
#define BFS_ICACHE_CODEC_LEN 16

/*
 * An index is kept only when the walk that built it asked for at least
 * this many reads of the backing file (served from fewer, larger
 * requests: bfs_io_ahead): below that, opening the entry would cost about
 * as much as the walk.
 */
#define BFS_ICACHE_MIN_READS 8

/* The identity an entry is keyed by: one version of one backing file. */
struct bfs_icache_key {
	uint64_t dev, ino, size;
	int64_t mtime_sec, ctime_sec;
	uint64_t mtime_nsec, ctime_nsec;
};

void bfs_icache_key_of(const struct stat *st, struct bfs_icache_key *key);

/**
 * bfs_icache_encode() - the entry for @idx, the index of file @key shown
 * with @codec (which must have cache_load).
 * @out: on success a malloc'd buffer of *@len bytes; the caller frees it.
 * Return: 0, -ENOMEM, -EINVAL when @idx cannot be kept (damaged, a
 * poisoned block, or a codec without cache support).
 */
BFS_MUST_CHECK int bfs_icache_encode(const struct bfs_icache_key *key,
				     const struct bfs_codec *codec, const struct bfs_index *idx,
				     uint8_t **out, size_t *len);

/**
 * bfs_icache_decode() - fill @idx from the entry at @p (@len bytes).
 * @idx: initialised for a file of key->size bytes, and empty.
 * Return: 0 with @idx built (source BFS_SRC_CACHE); 1 when the entry is
 * stale, foreign or damaged (*@why says which; @idx is empty again);
 * -ENOMEM (@idx empty again).
 */
BFS_MUST_CHECK int bfs_icache_decode(const uint8_t *p, size_t len, const struct bfs_icache_key *key,
				     const struct bfs_codec *codec, struct bfs_index *idx,
				     const char **why);

/**
 * bfs_icache_open() - use directory @dir for entries.
 * Refuses a directory that someone other than the daemon's user (or
 * root) owns or that group or others may write: an entry tells blockfs
 * where blocks are, so whoever may write one must be trusted as blockfs
 * is. Whether @dir is writable shows at the first save.
 * @err: on failure, a one-line reason naming @dir.
 * Return: 0 or -errno.
 */
BFS_MUST_CHECK int bfs_icache_open(struct bfs_icache **out, const char *dir, char *err,
				   size_t errlen);
void bfs_icache_free(struct bfs_icache *c); /* NULL is a no-op */

/**
 * bfs_icache_set_limit() - keep at most @bytes of entries in the
 * directory; 0 (the default) sets no bound. Past the bound a save drops
 * the least recently used entries (written, or read: to the hour, by
 * their mtime) until three quarters of it are left, and removes
 * temporary files that writers which died left behind an hour ago. An
 * entry larger than @bytes is not kept. Other mounts sharing the
 * directory are counted at the next trim.
 * Context: before @c is shared between threads.
 */
void bfs_icache_set_limit(struct bfs_icache *c, uint64_t bytes);
/* The directory @c keeps entries in, as given to bfs_icache_open(). */
const char *bfs_icache_dir(const struct bfs_icache *c);

/**
 * bfs_icache_default_dir() - where the daemon keeps entries when not told:
 * $XDG_CACHE_HOME/blockfs, or $HOME/.cache/blockfs when XDG_CACHE_HOME is
 * unset (either used only when absolute). Makes what is missing of it
 * below $HOME or $XDG_CACHE_HOME, mode 0700; never $HOME itself.
 * @out: on success a malloc'd path; bfs_icache_open() still checks it.
 * @err: on failure, one line saying why there is none.
 * Return: 0; 1 when neither variable names a place; -errno.
 */
BFS_MUST_CHECK int bfs_icache_default_dir(char **out, char *err, size_t errlen);

/**
 * bfs_icache_load() - the cached index of the file @st describes.
 * @c: NULL means no cache (returns 1).
 * @idx: as for bfs_icache_decode().
 * Return: 0 when @idx was filled from an entry; 1 when there is none to
 * use (absent, or ignored: see the debug log); -ENOMEM.
 * Context: any thread; reads one file in the cache directory.
 */
BFS_MUST_CHECK int bfs_icache_load(struct bfs_icache *c, const struct stat *st,
				   const struct bfs_codec *codec, struct bfs_index *idx);

/**
 * bfs_icache_save() - keep @idx, just built by a walk that made
 * @scan_reads backing reads, for the file open as @fd, which was @st
 * when the walk began.
 * Saves nothing when @c is NULL, when the walk was cheap (below
 * BFS_ICACHE_MIN_READS), when the index is damaged, when the file
 * changed during the walk (fstat of @fd differs from @st), or when the
 * entry would be larger than the directory's bound. Writes a
 * temporary file in the directory and renames it over the entry, so a
 * reader sees the old entry or the new one, never a part. Without fsync:
 * after a crash a torn entry fails its checksum and the file is walked
 * again. The first failure to write (read-only or full directory) turns
 * saving off for the rest of the mount, with one log line.
 * Return: 0 when the entry was written; 1 when nothing was to be saved
 * (the cases above); -errno when writing failed (saving is off now).
 * The daemon need not look: blockfs-pack --index --index-cache does.
 * Context: any thread; writes one file (an entry is 24 bytes a block,
 * plus gzip's windows: well under the walk's own cost).
 */
int bfs_icache_save(struct bfs_icache *c, int fd, const struct stat *st,
		    const struct bfs_codec *codec, const struct bfs_index *idx,
		    uint64_t scan_reads);

/*
 * Directory memos. What listings learned of the files of a backing
 * directory (which codec claims each, and the decoded size of each shown
 * decoded) is kept beside the indexes as DEV-INO.dir, so that the next
 * mount lists the directory and sizes its files without opening one.
 * A memo holds for the directory version it was made from (device, inode,
 * mtime and ctime to the nanosecond: adding, removing or renaming an
 * entry changes them), the exact sorted list of names, and the mount's
 * rules for which codecs claim a file; each entry holds for the file
 * version its stamp names (bfs_backing_stamp()). Layout, little-endian:
 *
 *   0    8  magic "BFSDIRMM"
 *   8    4  version                  1
 *   12   4  rules                    bit 0: -o gzip=index
 *   16   8  st_dev                   the directory ...
 *   24   8  st_ino
 *   32   8  mtime seconds            (signed)
 *   40   8  mtime nanoseconds
 *   48   8  ctime seconds            (signed)
 *   56   8  ctime nanoseconds        ... all must match
 *   64   8  n                        entries, as the directory has now
 *   72   4  XXH32 (seed 0) of the n names in byte order, each with its NUL
 *   76   4  reserved                 0
 *   80   n x 24 entries, in the names' order:
 *        +0 8 stamp  +8 8 decoded size  +16 1 zero  +17 1 flags
 *        (1 stamped, 2 sized)  +18 6 zero
 *   end  4  XXH32 (seed 0) of every byte before it
 */
#define BFS_DIRMEMO_MAGIC     "BFSDIRMM"
#define BFS_DIRMEMO_VERSION   2u /* 1 kept what probing found: names depended on it */
#define BFS_DIRMEMO_HDR_LEN   80
#define BFS_DIRMEMO_ENTRY_LEN 24

#define BFS_DIRMEMO_STAMPED 1u /* the stamp a lookup found is known */
#define BFS_DIRMEMO_SIZED   2u /* and size: the decoded size under stamp */

/* The directory version a memo is for. */
struct bfs_dirmemo_key {
	uint64_t dev, ino;
	int64_t mtime_sec, ctime_sec;
	uint64_t mtime_nsec, ctime_nsec;
	uint64_t n;	/* entries */
	uint32_t names; /* XXH32 of the sorted names, each with its NUL */
	uint32_t rules; /* bit 0: -o gzip=index */
};

/* What a memo says of one entry. */
struct bfs_dirmemo_ent {
	uint64_t stamp;	    /* of the file looked up; STAMPED */
	uint64_t size;	    /* its decoded size; SIZED */
	unsigned int flags; /* BFS_DIRMEMO_* */
};

/* Bytes of a memo of @n entries; 0 when @n is more than a memo may hold (dirmemo.c). */
size_t bfs_dirmemo_len(uint64_t n);
/* The memo of @key->n entries @e. Return: 0 and a malloc'd *@out, or -ENOMEM. */
BFS_MUST_CHECK int bfs_dirmemo_encode(const struct bfs_dirmemo_key *key,
				      const struct bfs_dirmemo_ent *e, uint8_t **out, size_t *len);

/**
 * bfs_dirmemo_decode() - the @key->n entries of memo @p (@len bytes) into @e.
 * Return: 0; 1 when the memo is for another directory version, other
 * names or rules, or fails a check (*@why; @e then undefined).
 */
BFS_MUST_CHECK int bfs_dirmemo_decode(const uint8_t *p, size_t len,
				      const struct bfs_dirmemo_key *key, struct bfs_dirmemo_ent *e,
				      const char **why);

/**
 * bfs_icache_dir_load() - the memo of the directory @key describes, into
 * @e (room for @key->n). @c: NULL means no cache.
 * Return: 0 when @e was filled; 1 when there is none to use; -ENOMEM.
 */
BFS_MUST_CHECK int bfs_icache_dir_load(struct bfs_icache *c, const struct bfs_dirmemo_key *key,
				       struct bfs_dirmemo_ent *e);

/**
 * bfs_icache_dir_save() - keep the memo of @key->n entries @e, written as
 * bfs_icache_save() writes an index (atomic rename; the first failure
 * turns saving off for the mount, with one log line).
 * Return: 0 written; 1 nothing to do (@c NULL or saving off); -errno.
 */
int bfs_icache_dir_save(struct bfs_icache *c, const struct bfs_dirmemo_key *key,
			const struct bfs_dirmemo_ent *e);

#endif
