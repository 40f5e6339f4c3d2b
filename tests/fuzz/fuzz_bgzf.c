// SPDX-License-Identifier: MIT
/*
 * Fuzzes BGZF without a sidecar: the sniff, the member walk of the scan
 * and the decoding of every member, verify on and off. The input is the
 * backing file.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold; every member that
 * decodes equals zlib's gzip decoding of the file at that offset, for the
 * run of good members from the start; a file both take whole has one length.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bfs_index idx;
	struct bfs_io io;
	struct fz_ref ref;
	int rc;

	(void)fz_sniff(&io, data, size);

	bfs_index_init(&idx, size);
	rc = bfs_codec_bgzf.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0) {
		fz_check_index(&idx, size);
		fz_gunzip(data, size, &ref);
		fz_check_blocks(&bfs_codec_bgzf, &idx, data, size, &ref);
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}
