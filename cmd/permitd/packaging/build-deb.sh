#!/bin/sh
# build-deb.sh [VERSION [OUTDIR]]: the permitd Debian package.
#
# Builds the release binary (build-release.sh, for linux and $GOARCH, else
# the host's architecture), stages it with the systemd unit, the docs and,
# when the repository has them, the files of cmd/permitd/deploy/ (alert
# rules, dashboard: to /usr/share/permitd/), and packs them with nfpm
# (nfpm.yaml), run with `go run` at a pinned version so that nothing enters
# go.mod. Prints the package's path. VERSION as for build-release.sh; the
# package's version is VERSION without its leading "v", a git describe
# suffix "-N-gHASH" as "+N.gHASH", another "-" as "~" (a pre-release sorts
# before its release), and "0~git" before a VERSION that does not start with
# a digit. OUTDIR defaults to dist/ under the repository root.
#
#   cmd/permitd/packaging/build-deb.sh v1.2.0     # dist/permitd_1.2.0_amd64.deb
#   sudo apt install ./dist/permitd_1.2.0_amd64.deb
set -eu

nfpm_version=${NFPM_VERSION:-v2.48.0}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
version=${1:-${VERSION:-}}
if [ -z "$version" ]; then
	version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || true)
	[ -n "$version" ] || version=devel
fi
outdir=${2:-$root/dist}
case $outdir in
/*) ;;
*) outdir=$(pwd)/$outdir ;;
esac

goarch=${GOARCH:-$(env -u GOARCH go env GOARCH)}
case $goarch in
amd64 | arm64 | riscv64 | s390x) debarch=$goarch ;;
386) debarch=i386 ;;
arm) debarch=armhf ;;
ppc64le) debarch=ppc64el ;;
*)
	echo "build-deb.sh: GOARCH \"$goarch\": allowed amd64, arm64, 386, arm, ppc64le, riscv64, s390x" >&2
	exit 2
	;;
esac

debversion=$(printf '%s\n' "${version#v}" | sed -E 's/-dirty$/+dirty/; s/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/-/~/g')
case $debversion in
[0-9]*) ;;
*) debversion=0~git$debversion ;;
esac

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
GOOS=linux GOARCH=$goarch GOARM=${GOARM:-7} sh "$here/build-release.sh" "$version" "$stage/usr/bin/permitd"
mkdir -p "$stage/usr/lib/systemd/system" "$stage/usr/share/doc/permitd"
cp "$here/permitd.service" "$stage/usr/lib/systemd/system/permitd.service"
cp "$root/LICENSE" "$stage/usr/share/doc/permitd/copyright"
cp "$root/cmd/permitd/README.md" "$stage/usr/share/doc/permitd/README.md"
if [ -d "$root/cmd/permitd/deploy" ]; then
	(cd "$root/cmd/permitd/deploy" && find . -type f ! -name '*.go' | while read -r f; do
		mkdir -p "$stage/usr/share/permitd/$(dirname "$f")"
		cp "$f" "$stage/usr/share/permitd/$f"
	done)
fi
mkdir -p "$stage/etc/permitd" "$stage/etc/default" "$stage/scripts"
cp "$here/permitd.json" "$stage/etc/permitd/permitd.json"
cp "$here/permitd.default" "$stage/etc/default/permitd"
cp "$here/postinst" "$here/prerm" "$here/postrm" "$stage/scripts/"
chmod -R u=rwX,go=rX "$stage"

mkdir -p "$outdir"
deb=$outdir/permitd_${debversion}_${debarch}.deb
cd "$stage"
env -u GOOS -u GOARCH -u GOARM PERMITD_DEB_ARCH="$debarch" PERMITD_DEB_VERSION="$debversion" \
	go run "github.com/goreleaser/nfpm/v2/cmd/nfpm@$nfpm_version" package \
	--config "$here/nfpm.yaml" --packager deb --target "$deb" >&2
echo "$deb"
