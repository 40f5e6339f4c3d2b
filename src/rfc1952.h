/* SPDX-License-Identifier: MIT */
/*
 * The gzip member format (RFC 1952 section 2.3), shared by the BGZF and
 * the plain gzip codecs.
 */
#ifndef BFS_RFC1952_H
#define BFS_RFC1952_H

#define GZ_ID1	       0x1f
#define GZ_ID2	       0x8b
#define GZ_CM_DEFLATE  8
#define GZ_FHCRC       0x02
#define GZ_FEXTRA      0x04
#define GZ_FNAME       0x08
#define GZ_FCOMMENT    0x10
#define GZ_FRESERVED   0xe0
#define GZ_TRAILER_LEN 8 /* CRC32 ISIZE */

#endif
