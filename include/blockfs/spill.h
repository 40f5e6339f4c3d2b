/* SPDX-License-Identifier: MIT */
/*
 * The spill: decoded bytes kept in unlinked files on local disk, so that
 * what was decoded and proven once is served by pread instead of being
 * decoded a second time. Three kinds: the output of a big chain (one zstd
 * frame, one xz block indexed as open spans, index.h BFS_BLK_OPEN) proven
 * whole (codec_zstd.c and codec_xz.c, prove()), written in order; single
 * blocks that cost much to decode again, made at once from bytes the
 * caller holds (bfs_spill_put(): unit.c); and the pieces of a walk that
 * decodes every unit to learn its size (bzip2 blocks, codec_bzip2.c;
 * index.h, kept), written in any order, one piece per unit. A leaf: one
 * lock of its own, nothing taken under it; no paths but the directory
 * given to bfs_spill_configure().
 *
 * Exactness: a spill becomes readable (bfs_spill_seal(),
 * bfs_spill_seal_pieces()) only once every byte of it is written; the
 * caller hands over only bytes it has proven (a chain's checksum and size,
 * a bzip2 block's CRC), and a piece is used only where it was written
 * whole. A spill that failed to write, or that was dropped, answers every
 * read with an error, and the caller decodes instead. Nothing here ever
 * makes a read fail: a spill is only a shortcut.
 *
 * Bound: one budget per process (one mount per process), in bytes of spill
 * files, counted from bfs_spill_begin() or bfs_spill_put() on (for
 * pieces, from each bfs_spill_piece()), and at most 1024 spills at once
 * (each holds a descriptor). Making room drops the sealed spills least
 * recently read; a spill (a piece) bigger than the whole budget, or one
 * there is no room for because the rest is still being written, is not
 * made: a walk's spill then keeps the pieces before it, and the units
 * after them are decoded when read.
 */
#ifndef BLOCKFS_SPILL_H
#define BLOCKFS_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_spill;

/**
 * bfs_spill_configure() - spill into directory @dir, at most @limit bytes.
 * @limit 0 turns spilling off (@dir is then not opened). Called by main()
 * before any file is read (tests may call it between cases). Spill files
 * are made with O_TMPFILE (or, where the file system has none, created and
 * unlinked at once), mode 0600: nobody else can open them.
 * Return: 0, or -errno when @dir cannot be opened (spilling stays off).
 */
BFS_MUST_CHECK int bfs_spill_configure(const char *dir, uint64_t limit);
/* Turn spilling off and close the directory; spills still held stay readable. */
void bfs_spill_shutdown(void);

/**
 * bfs_spill_begin() - a new spill of exactly @size bytes, its room reserved.
 * Counts one proof decode (bfs_spill_stats().proofs) whether or not a
 * spill is made: callers call it once before each whole-chain proof.
 * Return: the spill, to be written in order with bfs_spill_write(); NULL
 * when spilling is off, @size is 0 or above the budget, there is no room,
 * or no file could be made.
 */
struct bfs_spill *bfs_spill_begin(uint64_t size);

/* Bytes of one buffer bfs_spill_next() gives. */
#define BFS_SPILL_BUF (1u << 20)

/**
 * bfs_spill_next() - where to put the spill's next bytes: a buffer of
 * *@len (BFS_SPILL_BUF) bytes, to be handed over with bfs_spill_add(); a
 * later call before that gives the same one. Waits while the spill's
 * writer is behind. Only the thread that began the spill.
 * Return: the buffer, or NULL when the spill failed (drop it).
 */
uint8_t *bfs_spill_next(struct bfs_spill *s, size_t *len);

/**
 * bfs_spill_add() - the first @len bytes of the buffer bfs_spill_next()
 * gave are the spill's next; they are written behind the caller's back.
 * Return: 0, or -errno (a write failed: ENOSPC, EIO; more than the size):
 * the spill is then unusable, and the caller should bfs_spill_drop() it.
 */
BFS_MUST_CHECK int bfs_spill_add(struct bfs_spill *s, size_t len);

/* bfs_spill_next(), a copy of @len bytes from @p, bfs_spill_add(); as often as needed. */
BFS_MUST_CHECK int bfs_spill_write(struct bfs_spill *s, const void *p, size_t len);

/**
 * bfs_spill_seal() - every byte is handed over and proven: once they are
 * written (it waits for that), readable from now on.
 * Return: 0, or -EBADMSG when fewer than its size were handed over or a
 * write failed (the spill is then unusable; drop it).
 */
BFS_MUST_CHECK int bfs_spill_seal(struct bfs_spill *s);

/**
 * bfs_spill_read() - @len bytes at @off of a sealed spill into @dst.
 * Marks the spill recently used. Any thread; several at once.
 * Return: 0; -ENOENT when it is not sealed or was dropped to make room;
 * -ERANGE past its size; the read's -errno (the spill is then dropped:
 * the caller decodes instead, and no later read tries it).
 */
BFS_MUST_CHECK int bfs_spill_read(struct bfs_spill *s, void *dst, size_t len, uint64_t off);

/**
 * bfs_spill_put() - a sealed spill of a copy of the @size bytes at @p: a
 * decoded unit the caller has proven whole (a block decoded with its
 * check), for reads to come. Written in the calling thread; counted in
 * bfs_spill_stats().units (and sealed), not in proofs. Room is made as
 * for bfs_spill_begin().
 * Return: the spill, readable at once; NULL when spilling is off, @size
 * is 0 or above the budget, there is no room, or a write failed.
 */
struct bfs_spill *bfs_spill_put(const void *p, uint64_t size);

/* Is spilling on (a budget and a directory)? A hint for callers deciding whether to decode for it. */
bool bfs_spill_on(void);

/* Is @s sealed and not dropped (a read would be tried)? A hint: it may go at once. */
bool bfs_spill_live(struct bfs_spill *s);

/* Give up @s's bytes now (its file goes once no read uses it); @s stays valid. */
void bfs_spill_forget(struct bfs_spill *s);

/* Free @s (NULL is a no-op). No read of it may be in flight or follow. */
void bfs_spill_drop(struct bfs_spill *s);

/*
 * Pieces: the spill of a walk that decodes to learn sizes (codec_bzip2.c),
 * whose total is not known when it begins. Bytes go in as pieces, from
 * any thread and in any order, each written whole at an offset the spill
 * chooses and reserving its room as it comes; the caller keeps where each
 * unit's piece went and hands over only bytes it has proven. The spill is
 * readable (bfs_spill_read() at those offsets) once sealed, as any other.
 */

/**
 * bfs_spill_begin_pieces() - a new, empty spill of pieces.
 * Counts one proof decode (bfs_spill_stats().proofs): call it once per walk.
 * Return: the spill, or NULL when spilling is off or no file could be made.
 */
struct bfs_spill *bfs_spill_begin_pieces(void);

/**
 * bfs_spill_piece() - write @len bytes from @p as a new piece of @s.
 * Makes room as bfs_spill_begin() does (the sealed spills least recently
 * read go first). Any thread, several at once, until bfs_spill_seal_pieces().
 * Return: 0 with *@off, where the piece starts in the spill; -ENOSPC when
 * there is no room (the budget or the disk), or the write's -errno. After
 * the first failure every later piece is refused (the ones before it stay good).
 */
BFS_MUST_CHECK int bfs_spill_piece(struct bfs_spill *s, const void *p, size_t len, uint64_t *off);

/**
 * bfs_spill_seal_pieces() - no more pieces: readable from now on. Every
 * bfs_spill_piece() call must have returned.
 * Return: 0, or -ENODATA when it holds no piece (drop it).
 */
BFS_MUST_CHECK int bfs_spill_seal_pieces(struct bfs_spill *s);

/* The mount's spill counters (user.blockfs.stats of the root). */
struct bfs_spill_stats {
	uint64_t bytes;	  /* spill bytes on disk or reserved now */
	uint64_t limit;	  /* the budget; 0: spilling is off */
	uint64_t proofs;  /* whole-chain proof decodes (bfs_spill_begin() calls) */
	uint64_t sealed;  /* spills written whole and sealed */
	uint64_t reads;	  /* reads served from spills */
	uint64_t dropped; /* sealed spills dropped to make room */
	uint64_t failed;  /* spills given up: write or read errors, no file, no room */
	uint64_t units;	  /* unit spills made (bfs_spill_put()) */
};
void bfs_spill_stats(struct bfs_spill_stats *st);

#endif
