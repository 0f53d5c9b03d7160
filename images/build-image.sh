#!/usr/bin/env bash
# images/build-image.sh -- builds the FROM-scratch images of demux-server and demux-client
# from the static binaries in build/bin (run `make build` first; `make images` does both).
#
#   images/build-image.sh [server|client ...]      (default: both)
#
# Tags demuxlab/<role>:<source-hash-12> and demuxlab/<role>:latest, and prints one JSON line per image
# on stdout: {"role": "server", "image": "demuxlab/server:<tag>", "id": "sha256:...", "source": "..."}.
# The labels come from the binary's own --version line ("source=<hash> compiler=<cc> flags=<cflags>"),
# so an image always describes the binary it holds.  Needs only the Docker engine: nothing is pulled.
# Environment: DEMUXLAB_BIN_DIR (default <repo>/build/bin).
set -euo pipefail

die() {
    echo "build-image.sh: $*" >&2
    exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin_dir=${DEMUXLAB_BIN_DIR:-$repo/build/bin}
roles=("$@")
[[ ${#roles[@]} -gt 0 ]] || roles=(server client)

command -v docker >/dev/null || die "docker is not installed (run make setup)"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable (docker info failed; start dockerd)"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

for role in "${roles[@]}"; do
    case $role in
    server | client) ;;
    *) die "unknown image '$role' (expected server or client)" ;;
    esac
    binary=$bin_dir/demux-$role
    [[ -x $binary ]] || die "$binary is missing: run make build"
    # A FROM-scratch image has no loader or libc: a dynamic binary would not start in it.
    if readelf -l "$binary" 2>/dev/null | grep -q 'Requesting program interpreter'; then
        die "$binary is dynamically linked; the images need the static build from make build"
    fi
    info=$("$binary" --version)
    re="^demux-$role source=([0-9a-f]+) compiler=(.*) flags=(.*)$"
    [[ $info =~ $re ]] || die "$binary --version printed '$info', expected 'demux-$role source=... compiler=... flags=...'"
    source_hash=${BASH_REMATCH[1]}
    compiler=${BASH_REMATCH[2]}
    cflags=${BASH_REMATCH[3]}
    [[ ${#source_hash} -ge 12 ]] || die "$binary reports a source hash shorter than 12 digits: $source_hash"
    tag=${source_hash:0:12}

    ctx=$stage/$role
    mkdir -p "$ctx"
    cp "$binary" "$ctx/demux-$role"
    binary_sha=$(sha256sum "$ctx/demux-$role" | cut -d' ' -f1)
    echo "build-image.sh: building demuxlab/$role:$tag" >&2
    # The legacy builder needs no buildx plugin and never pulls for FROM scratch.
    DOCKER_BUILDKIT=0 docker build --quiet \
        --file "$repo/images/$role/Dockerfile" \
        --build-arg "SOURCE_SHA256=$source_hash" \
        --build-arg "COMPILER=$compiler" \
        --build-arg "CFLAGS=$cflags" \
        --build-arg "BINARY_SHA256=$binary_sha" \
        --tag "demuxlab/$role:$tag" --tag "demuxlab/$role:latest" \
        "$ctx" >/dev/null 2>"$stage/$role.log" || {
        cat "$stage/$role.log" >&2
        die "docker build of demuxlab/$role failed"
    }
    id=$(docker image inspect --format '{{.Id}}' "demuxlab/$role:$tag")
    printf '{"role": "%s", "image": "demuxlab/%s:%s", "id": "%s", "source": "%s", "binary_sha256": "%s"}\n' \
        "$role" "$role" "$tag" "$id" "$source_hash" "$binary_sha"
done
