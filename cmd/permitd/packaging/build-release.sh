#!/bin/sh
# build-release.sh [VERSION [OUT]]: a release build of permitd.
#
# A static binary (CGO_ENABLED=0) with reproducible paths (-trimpath), the
# commit stamped when built in a git clone (-buildvcs=auto), no
# symbol table or DWARF (-s -w), and VERSION stamped in (-X main.version),
# so that `permitd version` and permitd_build_info report it. VERSION
# defaults to $VERSION, else `git describe --tags --always --dirty`, else
# "devel"; OUT to dist/permitd under the repository root. GOOS and GOARCH
# cross-compile as usual. Run from anywhere in the repository:
#
#   cmd/permitd/packaging/build-release.sh v1.2.0
#   GOARCH=arm64 cmd/permitd/packaging/build-release.sh v1.2.0 dist/arm64/permitd
#
# The Dockerfile and build-deb.sh build with this script.
set -eu

root=$(cd "$(dirname "$0")/../../.." && pwd)
version=${1:-${VERSION:-}}
if [ -z "$version" ]; then
	version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || true)
	[ -n "$version" ] || version=devel
fi
case $version in
*[!0-9A-Za-z.+~_-]* | -*)
	echo "build-release.sh: version \"$version\": allowed letters, digits and . + ~ _ - (not first), such as v1.2.0" >&2
	exit 2
	;;
esac
out=${2:-$root/dist/permitd}
case $out in
/*) ;;
*) out=$(pwd)/$out ;;
esac

cd "$root"
CGO_ENABLED=0 go build -trimpath -buildvcs=auto -ldflags "-s -w -X main.version=$version" -o "$out" ./cmd/permitd
echo "build-release.sh: built $out, version $version" >&2
