#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Index sidecars and -o keep_compressed, on real mounts:
# - without it, the sidecars of a file shown decoded (X.gz.gzi, .tbi, .csi,
#   .fai; X.bgz.gzi; plain gzip's too) are neither listed nor found by
#   name, while orphans and other names stay;
# - with it, each decoded file's compressed file is shown too, unchanged,
#   under its own name and with its own st_ino, beside its sidecars, so
#   that tabix and samtools faidx give through the mount what they give on
#   SOURCE.
#
# Usage: sidecars.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: sidecars.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin sidecars lz4 bgzip tabix samtools python3 gzip

S=$T/src M=$T/mnt O=$T/orig
mkdir -p "$S" "$M" "$O"

mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "$1"; then
		not_ok "mount ($1)" "daemon exit status: ${BFS_EXIT:-none}"
		exit 1
	fi
}

# --- the tree: what tabix, bgzip and samtools make ------------------------------

python3 - "$O" <<'PY'
import os, random, sys
rng = random.Random(13)
o = sys.argv[1]
with open(os.path.join(o, "calls.vcf"), "w") as f:
    f.write("##fileformat=VCFv4.2\n")
    for c in ("chr1", "chr2"):
        f.write("##contig=<ID=%s,length=5000000>\n" % c)
    f.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
    for c in ("chr1", "chr2"):
        pos = 0
        for _ in range(20000):
            pos += rng.randint(1, 200)
            ref, alt = rng.sample("ACGT", 2)
            f.write("%s\t%d\t.\t%s\t%s\t%d\tPASS\tDP=%d\n" % (c, pos, ref, alt,
                    rng.randint(10, 99), rng.randint(1, 60)))
with open(os.path.join(o, "ref.fa"), "w") as f:
    for name in ("seq1", "seq2"):
        f.write(">%s\n" % name)
        seq = "".join(rng.choice("ACGT") for _ in range(300000))
        for i in range(0, len(seq), 60):
            f.write(seq[i:i + 60] + "\n")
PY
bgzip -c "$O/calls.vcf" >"$S/calls.vcf.gz"
tabix -p vcf "$S/calls.vcf.gz"				# calls.vcf.gz.tbi
cp "$S/calls.vcf.gz" "$S/calls2.vcf.gz"
tabix -C -p vcf "$S/calls2.vcf.gz"			# calls2.vcf.gz.csi
bgzip -c "$O/ref.fa" >"$S/ref.fa.gz"
samtools faidx "$S/ref.fa.gz"				# ref.fa.gz.fai, ref.fa.gz.gzi
bgzip -c -i -I "$S/data.bgz.gzi" "$O/ref.fa" >"$S/data.bgz"
gzip -c "$O/calls.vcf" >"$S/plain.gz"			# plain gzip: decoded too
cp "$S/calls.vcf.gz.tbi" "$S/plain.gz.tbi"
cp "$S/calls.vcf.gz.tbi" "$S/orphan.gz.tbi"		# no orphan.gz
lz4 -q "$O/calls.vcf" "$S/v.lz4"
cp "$S/calls.vcf.gz.tbi" "$S/v.lz4.tbi"			# not a sidecar of an lz4 file

HIDDEN=(calls.vcf.gz.tbi calls2.vcf.gz.csi ref.fa.gz.fai ref.fa.gz.gzi data.bgz.gzi plain.gz.tbi)
KEPT=(orphan.gz.tbi v.lz4.tbi)

# shellcheck disable=SC2012 # ls is the user's view under test; the names are plain
listed() {
	(cd "$M" && ls -1 | LC_ALL=C sort | tr '\n' ' ')
}

# --- without keep_compressed ---------------------------------------------------------

mount_or_die readpath=pread
check_eq "listing: decoded names, no sidecar of theirs" \
	"calls.vcf calls2.vcf data orphan.gz.tbi plain ref.fa v v.lz4.tbi " "$(listed)"
hidden=ok
for f in "${HIDDEN[@]}"; do
	[[ ! -e "$M/$f" ]] || hidden="$f found by name"
done
check_eq "a hidden sidecar is not found by name either" ok "$hidden"
kept=ok
for f in "${KEPT[@]}"; do
	cmp -s "$S/$f" "$M/$f" || kept="$f differs or is missing"
done
check_eq "sidecars of files shown as they are, orphans, others: shown unchanged" ok "$kept"
check "calls.vcf reads decoded" cmp "$O/calls.vcf" "$M/calls.vcf"
check "ref.fa reads decoded" cmp "$O/ref.fa" "$M/ref.fa"
check "plain (plain gzip) reads decoded" cmp "$O/calls.vcf" "$M/plain"
check "data (with its .gzi) reads decoded" cmp "$O/ref.fa" "$M/data"
check_fails "the compressed name is not shown" "No such file" stat "$M/calls.vcf.gz"
bfs_umount
check_eq "unmount, exit 0" 0 "$?"

# --- with keep_compressed ------------------------------------------------------------

mount_or_die readpath=pread,keep_compressed
check_eq "keep_compressed listing: decoded and compressed names, the sidecars" \
	"calls.vcf calls.vcf.gz calls.vcf.gz.tbi calls2.vcf calls2.vcf.gz calls2.vcf.gz.csi data data.bgz data.bgz.gzi orphan.gz.tbi plain plain.gz plain.gz.tbi ref.fa ref.fa.gz ref.fa.gz.fai ref.fa.gz.gzi v v.lz4 v.lz4.tbi " \
	"$(listed)"
same=ok
for f in calls.vcf.gz calls2.vcf.gz ref.fa.gz data.bgz v.lz4 "${HIDDEN[@]}"; do
	cmp -s "$S/$f" "$M/$f" || same="$f differs"
done
check_eq "the compressed files and sidecars read as they are" ok "$same"
check "calls.vcf still reads decoded" cmp "$O/calls.vcf" "$M/calls.vcf"
check_eq "the compressed view keeps the backing st_ino" \
	"$(stat -c %i "$S/calls.vcf.gz")" "$(stat -c %i "$M/calls.vcf.gz")"
check_eq "... the decoded view has its own" different \
	"$([[ $(stat -c %i "$M/calls.vcf") != $(stat -c %i "$M/calls.vcf.gz") ]] &&
		echo different || echo same)"
check_eq "readdir d_ino agrees with st_ino for both views" agree "$(python3 - "$M" <<'PY'
import os, sys
bad = [e.name for e in os.scandir(sys.argv[1])
       if e.inode() != os.stat(e.path, follow_symlinks=False).st_ino]
print(" ".join(bad) if bad else "agree")
PY
)"
check_eq "user.blockfs.format: raw for the compressed view" raw \
	"$(t getfattr --absolute-names --only-values -n user.blockfs.format "$M/calls.vcf.gz")"

for region in chr1:100000-200000 chr2:1-50000 chr2:2000000-2100000; do
	check_eq "tabix calls.vcf.gz $region through the mount = on SOURCE" \
		"$(tabix "$S/calls.vcf.gz" "$region" | md5sum)" \
		"$(t tabix "$M/calls.vcf.gz" "$region" | md5sum)"
done
# shellcheck disable=SC2016 # bash -c expands its own arguments
check "tabix finds records through the mount" \
	bash -c '[[ $(tabix "$1" chr1:100000-200000 | wc -l) -gt 100 ]]' _ "$M/calls.vcf.gz"
check_eq "tabix with the .csi (calls2.vcf.gz) through the mount = on SOURCE" \
	"$(tabix "$S/calls2.vcf.gz" chr1:1-300000 | md5sum)" \
	"$(t tabix "$M/calls2.vcf.gz" chr1:1-300000 | md5sum)"
for region in seq1:1-100 seq1:123456-124000 seq2:299900-300000; do
	check_eq "samtools faidx ref.fa.gz $region through the mount = on SOURCE" \
		"$(samtools faidx "$S/ref.fa.gz" "$region" | md5sum)" \
		"$(t samtools faidx "$M/ref.fa.gz" "$region" | md5sum)"
done
bfs_umount
check_eq "unmount, exit 0" 0 "$?"
bfs_end
