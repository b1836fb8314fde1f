# Sourced by the run scripts: read corpora from $SEQBENCH_DATA_DIR when set, else from the sibling
# ../shared/data when this checkout has one, else download into ./data on first use.
if [ -z "${SEQBENCH_DATA_DIR:-}" ] && [ -d "$(pwd)/../shared/data" ]; then
  export SEQBENCH_DATA_DIR="$(cd ../shared/data && pwd)"
fi
