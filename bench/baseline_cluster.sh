#!/usr/bin/env bash
# The hand-made way to get the seed's topology, as a yardstick for `cluster up`:
# initdb, pg_basebackup -R for two standbys, pg_ctl start, then a fixed settle
# instead of checking sync states.
#   baseline_cluster.sh up BIN_DIR DIR PORT     baseline_cluster.sh down BIN_DIR DIR
# Run as the account that owns DIR (not root).
set -euo pipefail
cmd=$1 bin=$2 dir=$3
if [ "$cmd" = up ]; then
    port=$4
    mkdir -p "$dir"
    "$bin/initdb" -D "$dir/a" -U postgres -A trust -N >/dev/null
    cat >>"$dir/a/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
synchronous_standby_names = '1(b,c)'
wal_level = replica
hot_standby = on
CONF
    echo "local replication all trust" >>"$dir/a/pg_hba.conf"
    "$bin/pg_ctl" -D "$dir/a" -l "$dir/a.log" -w -s start
    for s in b c; do
        "$bin/pg_basebackup" -D "$dir/$s" -h "$dir" -p "$port" -U postgres -X stream -c fast \
            -R -d "host=$dir port=$port user=postgres application_name=$s"
        port=$((port + 1))
        echo "port = $port" >>"$dir/$s/postgresql.conf"
        "$bin/pg_ctl" -D "$dir/$s" -l "$dir/$s.log" -w -s start
    done
    sleep 2
elif [ "$cmd" = down ]; then
    for s in c b a; do "$bin/pg_ctl" -D "$dir/$s" -m fast -w -s stop; done
    rm -rf "$dir"
fi
