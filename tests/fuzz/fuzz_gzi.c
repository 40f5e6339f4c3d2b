// SPDX-License-Identifier: MIT
/*
 * Fuzzes the .gzi sidecar reader together with the BGZF file it indexes.
 * Input: LE32 length L, then L bytes of .gzi, then the BGZF file (L is
 * clamped to what follows; make-corpus.sh writes such pairs from bgzip -i).
 *
 * Checks: the scan with the sidecar returns only documented errors and a
 * sound index; every block that decodes equals zlib's output at its
 * offset, for the run of good blocks from the start (a sidecar that lies
 * may cost EIO, never other bytes); when the sidecar's index and the walk
 * both decode whole, they agree with zlib on the length.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* Scan @data with @side (NULL: walk) and check it against @ref. */
static void scan_and_check(const uint8_t *data, size_t size, struct bfs_io *side,
			   const struct fz_ref *ref)
{
	struct bfs_index idx;
	struct bfs_io io;
	int rc;

	bfs_io_init_mem(&io, data, size);
	bfs_index_init(&idx, size);
	rc = bfs_codec_bgzf.scan(&io, side, &idx);
	FZ_CHECK(rc == 0 || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0)
		fz_check_blocks(&bfs_codec_bgzf, &idx, data, size, ref);
	bfs_index_destroy(&idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bfs_io side;
	struct fz_ref ref;
	size_t glen;

	if (size < 4)
		return 0;
	glen = bfs_le32(data);
	data += 4;
	size -= 4;
	if (glen > size)
		glen = size;
	bfs_io_init_mem(&side, data, glen);
	fz_gunzip(data + glen, size - glen, &ref);
	scan_and_check(data + glen, size - glen, &side, &ref);
	scan_and_check(data + glen, size - glen, NULL, &ref);
	free(ref.p);
	return 0;
}
