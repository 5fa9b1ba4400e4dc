#!/bin/sh
# A Spark standalone master and worker on this machine, from the pip-installed pyspark (which ships
# sbin/spark-daemon.sh but not start-master.sh/start-worker.sh). For a real cluster, run the worker line
# on every executor machine, pointed at the master.
#
#   deploy/spark/standalone.sh start     # master spark://$SPARK_MASTER_HOST:7077, one worker
#   deploy/spark/standalone.sh stop
#
# Their web UIs listen on 8180 (master) and 8181 (worker), not Spark's 8080 and 8081: logcleaner's REST API
# takes 8080 (SPARK_MASTER_WEBUI_PORT, SPARK_WORKER_WEBUI_PORT change them).
# Then: logcleaner serve --config deploy/spark/server.properties
# Executors open the segment files themselves: every worker must see the log dirs at the same path as
# the service (shared storage), and run the same Python with logcleaner installed.
set -eu

case "${1:-}" in
start | stop) ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac

python="${PYSPARK_PYTHON:-python3}"
SPARK_HOME="${SPARK_HOME:-$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
export SPARK_HOME
state="${TMPDIR:-/tmp}/logcleaner-spark"
export SPARK_LOG_DIR="${SPARK_LOG_DIR:-$state/logs}"
export SPARK_PID_DIR="${SPARK_PID_DIR:-$state/pids}"
export SPARK_WORKER_DIR="${SPARK_WORKER_DIR:-$state/work}"
host="${SPARK_MASTER_HOST:-127.0.0.1}"
port="${SPARK_MASTER_PORT:-7077}"
daemon="$SPARK_HOME/sbin/spark-daemon.sh"

if [ "$1" = start ]; then
    mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$SPARK_WORKER_DIR"
    "$daemon" start org.apache.spark.deploy.master.Master 1 --host "$host" --port "$port" \
        --webui-port "${SPARK_MASTER_WEBUI_PORT:-8180}"
    "$daemon" start org.apache.spark.deploy.worker.Worker 1 --host "$host" \
        --webui-port "${SPARK_WORKER_WEBUI_PORT:-8181}" \
        --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-2g}" "spark://$host:$port"
    echo "spark.master=spark://$host:$port, its web UI http://$host:${SPARK_MASTER_WEBUI_PORT:-8180} (logs in $SPARK_LOG_DIR)"
else
    "$daemon" stop org.apache.spark.deploy.worker.Worker 1
    "$daemon" stop org.apache.spark.deploy.master.Master 1
fi
