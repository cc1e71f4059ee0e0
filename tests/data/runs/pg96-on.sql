BEGIN TRANSACTION;
CREATE TABLE cells (
    id integer primary key,
    run_id integer not null references runs(id),
    idx integer not null,
    key text not null,
    label text not null,
    axes_json text not null,
    params_json text not null,
    status text not null,            -- pending | running | done | failed
    error text,
    repeats integer not null default 0,
    stop_reason text,                -- ci (target met) | max (repeats_max reached)
    tps_mean real, tps_stdev real, tps_ci_low real, tps_ci_high real, tps_ci_rel real,
    transactions integer, failed integer,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob,                  -- all repeats merged
    started_at text, finished_at text,
    unique (run_id, key)
);
INSERT INTO "cells" VALUES(1,1,0,'pg=9.6,synchronous_commit=on','pg=9.6 sc=on','{"pg": "9.6", "synchronous_commit": "on"}','{"pg": "9.6", "standbys": 2, "sync": "1(b,c)", "settings": "default", "synchronous_commit": "on", "clients": 8, "threads": 2, "batch": 1}','done',NULL,2,'max',2.79332972549999976764e+03,1.08730420278230099028e+02,1.81642565820536424324e+03,3.77023379279463551928e+03,3.49727444768365758331e-01,22303,0,2.82203788727973803318e+00,2.4795,4.1915,8.1595,12.8635,16.164,X'53524C4801789C95D56770954514C6F1FB3F370D0221A41908908CC650124D508C9196D04420521444442112A262406916441010414140548A18155050B08088581114111B2276C5DE1B2AF68665C6673F7066EEA8F7CB6FF6ECD9B3EF3B77DF3DB9832307FCF2CBFF3195B84862F5D6682462649045364D694E0BF238847C0A68491B0A29E2308A29A12D477024ED388A528EA68C63684F073AD289CE94534117BAD28DEEF4E0587A721CBDE84D1F2A399EBEF4A33F0338811319C8204E62302733845318CAA99CC6308653C5E98CA09A91D47006677216A3389B5A463386733897B18C633C1398C8799CCF055CC8242E6232173385A95CC234A633834B99C965CC62369773057398CB95CC633E0BB88A855CCD355CCB2216B384A55CC732AEA78E1BB8919B58CE0A567233B7B08AD5DCCA6DAC612DB77307777217EB58CFDD6CE01E36722F9BB88FFB798007798887D9CC236C612B8FF218DB789CED3CC10E9EE4299EE6199E6527CFB18BE7D9CD0BBCC84BBCCC2BBCCA6BBCCE1BECE14DDEE26DDEE15DDEE37D3EE0433EE2633EE1533EE373BEE04BF6F2155FF30DFBF896EFF89E1FF8919FF8995FF895DFF89DFDFCC19FFCFD179A59D4E22CDE122CD192AC9ED5B7646B600D2DC51A59AA35B674CBB04CCBB2832CDB9A5853CBB166D6C2722DCF0EB67C2BB056D6DADA58A11559B19558A9955907EB649D2D41E78618DABFCCFB3C6F988FFECFFA51371F8D61C88F7386F90417B718E3905F4F26C964174F71F154595F3674F14C992E1BCB6C99260F75F3CD5C5E4BD95AB69245B2ADAC90A5B29DEC2907CA3EB246F69343E520D9430E93C3E5443946CE9153E55839CE39DBE54F91F3E57AB94CD6C92572955CE4F2D6C8DD72AFDC28B7C80D72ADDC25B7857D74A016C869B2462E9473E52C39534E9093659DAC959364B5AC945572B4AC90F16EDC4BE6C85C9928F7450E5C9720F72BBE53EE913BE466B95A6E92EBE40AB95D4E97CBE53CB9522E75F15A19CEC50C19CEC362395286F3365E867339428673D75F863618CEF90037EE2BBBCB2E327C371DDD738D72CF5D25BBCA21B25296BB3A65B2B78BB797E1BB2C94FEFB2E9687CB0219EE853C59229BCB2237CE91196E5DD82FCDE5A7B8785897EEE633DD7C8867C9701F367079E15E6C22C37D17F60B75FDFD1A4C7186FA496E1CEA26CA702F27BB71A8EBEFF7F0BE69CEF05EF132F40FDF37425ED8DFF79BB03EAC4B8E311FF4FDCCF74DFF3CB1FA6AAC3E18ABBFFA3AB1EAFED77EEFF3FF02578DC276','2026-11-22T08:56:20.642+00:00','2026-11-22T08:56:40.074+00:00');
CREATE TABLE clusters (
    id integer primary key,
    run_id integer not null references runs(id),
    cluster_key text not null,
    version text, bin_dir text, nodes_json text,
    settings_json text,              -- every non-default setting per node, read back
    created_at text not null
);
INSERT INTO "clusters" VALUES(1,1,'["9.6", 2, "default"]','9.6.24','/var/lib/syncrep-lab/cache/pg/9.6.24/bin','[{"name": "primary", "role": "primary", "port": 45413}, {"name": "b", "role": "standby", "port": 34233}, {"name": "c", "role": "standby", "port": 56525}]','{"primary": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_stack_depth": {"setting": "2048", "unit": "kB", "source": "environment variable"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "256", "unit": "16MB", "source": "configuration file"}, "min_wal_size": {"setting": "64", "unit": "16MB", "source": "configuration file"}, "port": {"setting": "45413", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "synchronous_standby_names": {"setting": "1 (b, c)", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-0ade97fcd4/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_segments": {"setting": "64", "unit": null, "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}, "b": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_stack_depth": {"setting": "2048", "unit": "kB", "source": "environment variable"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "256", "unit": "16MB", "source": "configuration file"}, "min_wal_size": {"setting": "64", "unit": "16MB", "source": "configuration file"}, "port": {"setting": "34233", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-0ade97fcd4/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_segments": {"setting": "64", "unit": null, "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}, "c": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_stack_depth": {"setting": "2048", "unit": "kB", "source": "environment variable"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "256", "unit": "16MB", "source": "configuration file"}, "min_wal_size": {"setting": "64", "unit": "16MB", "source": "configuration file"}, "port": {"setting": "56525", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-0ade97fcd4/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_segments": {"setting": "64", "unit": null, "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}}','2026-11-22T08:56:22.283+00:00');
CREATE TABLE costs (   -- perf stat per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    cpu_ms real not null, context_switches integer not null, syscalls_json text not null
);
INSERT INTO "costs" VALUES(3,'b','backend',1,16.16,108,'{"close": 8, "epoll_create1": 1, "epoll_ctl": 5, "epoll_pwait": 0, "epoll_wait": 86, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 46, "recvfrom": 173, "sendto": 97, "write": 0}');
INSERT INTO "costs" VALUES(3,'b','bgwriter',1,2.55,27,'{"close": 23, "epoll_create1": 23, "epoll_ctl": 46, "epoll_pwait": 0, "epoll_wait": 23, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 0, "sendto": 21, "write": 0}');
INSERT INTO "costs" VALUES(3,'b','other',1,1.59,29,'{"close": 29, "epoll_create1": 29, "epoll_ctl": 87, "epoll_pwait": 0, "epoll_wait": 29, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 61, "sendto": 0, "write": 0}');
INSERT INTO "costs" VALUES(3,'b','startup',1,291.78,4032,'{"close": 3520, "epoll_create1": 3519, "epoll_ctl": 7038, "epoll_pwait": 0, "epoll_wait": 6971, "fdatasync": 0, "fsync": 1, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 39977, "recvfrom": 0, "sendto": 0, "write": 3561}');
INSERT INTO "costs" VALUES(3,'b','walreceiver',1,703.54,13070,'{"close": 3578, "epoll_create1": 3578, "epoll_ctl": 10734, "epoll_pwait": 0, "epoll_wait": 3578, "fdatasync": 3573, "fsync": 0, "futex": 0, "kill": 3519, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 7163, "sendto": 7146, "write": 3854}');
INSERT INTO "costs" VALUES(3,'c','backend',1,19.1,134,'{"close": 8, "epoll_create1": 1, "epoll_ctl": 5, "epoll_pwait": 0, "epoll_wait": 86, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 46, "recvfrom": 173, "sendto": 97, "write": 0}');
INSERT INTO "costs" VALUES(3,'c','bgwriter',1,2.77,44,'{"close": 24, "epoll_create1": 24, "epoll_ctl": 48, "epoll_pwait": 0, "epoll_wait": 24, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 0, "sendto": 21, "write": 0}');
INSERT INTO "costs" VALUES(3,'c','other',1,1.93,31,'{"close": 31, "epoll_create1": 31, "epoll_ctl": 93, "epoll_pwait": 0, "epoll_wait": 31, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 63, "sendto": 0, "write": 0}');
INSERT INTO "costs" VALUES(3,'c','startup',1,293.82,3960,'{"close": 3522, "epoll_create1": 3521, "epoll_ctl": 7042, "epoll_pwait": 0, "epoll_wait": 6980, "fdatasync": 0, "fsync": 1, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 39979, "recvfrom": 0, "sendto": 0, "write": 3567}');
INSERT INTO "costs" VALUES(3,'c','walreceiver',1,709.24,12320,'{"close": 3574, "epoll_create1": 3574, "epoll_ctl": 10722, "epoll_pwait": 0, "epoll_wait": 3574, "fdatasync": 3569, "fsync": 0, "futex": 0, "kill": 3521, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 7158, "sendto": 7138, "write": 3950}');
INSERT INTO "costs" VALUES(3,'primary','backend',1,2187.02,48055,'{"close": 9489, "epoll_create1": 9419, "epoll_ctl": 18877, "epoll_pwait": 0, "epoll_wait": 27948, "fdatasync": 4154, "fsync": 0, "futex": 0, "kill": 7875, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 19189, "recvfrom": 18933, "sendto": 9884, "write": 13622}');
INSERT INTO "costs" VALUES(3,'primary','bgwriter',1,2.01,31,'{"close": 23, "epoll_create1": 23, "epoll_ctl": 46, "epoll_pwait": 0, "epoll_wait": 23, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 0, "sendto": 20, "write": 0}');
INSERT INTO "costs" VALUES(3,'primary','other',1,5.7,118,'{"close": 114, "epoll_create1": 114, "epoll_ctl": 342, "epoll_pwait": 0, "epoll_wait": 114, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 264, "sendto": 0, "write": 0}');
INSERT INTO "costs" VALUES(3,'primary','walsender:b',1,670.54,9789,'{"close": 8296, "epoll_create1": 8296, "epoll_ctl": 24888, "epoll_pwait": 0, "epoll_wait": 11199, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 9415, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 15514, "recvfrom": 20120, "sendto": 3854, "write": 3369}');
INSERT INTO "costs" VALUES(3,'primary','walsender:c',1,458.85,8813,'{"close": 8430, "epoll_create1": 8430, "epoll_ctl": 25290, "epoll_pwait": 0, "epoll_wait": 11994, "fdatasync": 0, "fsync": 0, "futex": 0, "kill": 0, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 16141, "recvfrom": 19868, "sendto": 3950, "write": 3764}');
INSERT INTO "costs" VALUES(3,'primary','walwriter',1,11.63,237,'{"close": 203, "epoll_create1": 203, "epoll_ctl": 406, "epoll_pwait": 0, "epoll_wait": 203, "fdatasync": 1, "fsync": 0, "futex": 0, "kill": 2, "poll": 0, "pread64": 0, "pwrite64": 0, "read": 0, "recvfrom": 0, "sendto": 0, "write": 1}');
CREATE TABLE flamegraphs (   -- one per node and role, plus '*'/'all'
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, cpu_us integer not null,
    folded_path text not null, svg_path text not null   -- relative to the run folder
);
INSERT INTO "flamegraphs" VALUES(3,'b','startup',272727,'artifacts/cell-000/repeat-03/flame/b-startup.folded','artifacts/cell-000/repeat-03/flame/b-startup.svg');
INSERT INTO "flamegraphs" VALUES(3,'b','walreceiver',868686,'artifacts/cell-000/repeat-03/flame/b-walreceiver.folded','artifacts/cell-000/repeat-03/flame/b-walreceiver.svg');
INSERT INTO "flamegraphs" VALUES(3,'c','startup',272727,'artifacts/cell-000/repeat-03/flame/c-startup.folded','artifacts/cell-000/repeat-03/flame/c-startup.svg');
INSERT INTO "flamegraphs" VALUES(3,'c','walreceiver',848484,'artifacts/cell-000/repeat-03/flame/c-walreceiver.folded','artifacts/cell-000/repeat-03/flame/c-walreceiver.svg');
INSERT INTO "flamegraphs" VALUES(3,'client','pgbench',262626,'artifacts/cell-000/repeat-03/flame/client-pgbench.folded','artifacts/cell-000/repeat-03/flame/client-pgbench.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','backend',2161614,'artifacts/cell-000/repeat-03/flame/primary-backend.folded','artifacts/cell-000/repeat-03/flame/primary-backend.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','other',20202,'artifacts/cell-000/repeat-03/flame/primary-other.folded','artifacts/cell-000/repeat-03/flame/primary-other.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','postmaster',10101,'artifacts/cell-000/repeat-03/flame/primary-postmaster.folded','artifacts/cell-000/repeat-03/flame/primary-postmaster.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','walsender:b',565656,'artifacts/cell-000/repeat-03/flame/primary-walsender_b.folded','artifacts/cell-000/repeat-03/flame/primary-walsender_b.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','walsender:c',535353,'artifacts/cell-000/repeat-03/flame/primary-walsender_c.folded','artifacts/cell-000/repeat-03/flame/primary-walsender_c.svg');
INSERT INTO "flamegraphs" VALUES(3,'primary','walwriter',20202,'artifacts/cell-000/repeat-03/flame/primary-walwriter.folded','artifacts/cell-000/repeat-03/flame/primary-walwriter.svg');
INSERT INTO "flamegraphs" VALUES(3,'*','all',5838378,'artifacts/cell-000/repeat-03/flame/all.folded','artifacts/cell-000/repeat-03/flame/all.svg');
CREATE TABLE meta (key text primary key, value text not null);
INSERT INTO "meta" VALUES('schema_version','3');
CREATE TABLE numa_pages (   -- numa_maps before and after a repeat
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, phase text not null,
    numa_node text not null, pages integer not null
);
INSERT INTO "numa_pages" VALUES(3,'b','bgwriter','before','N0',1122);
INSERT INTO "numa_pages" VALUES(3,'b','checkpointer','before','N0',1080);
INSERT INTO "numa_pages" VALUES(3,'b','other','before','N0',944);
INSERT INTO "numa_pages" VALUES(3,'b','postmaster','before','N0',22552);
INSERT INTO "numa_pages" VALUES(3,'b','startup','before','N0',2763);
INSERT INTO "numa_pages" VALUES(3,'b','walreceiver','before','N0',1735);
INSERT INTO "numa_pages" VALUES(3,'c','bgwriter','before','N0',1125);
INSERT INTO "numa_pages" VALUES(3,'c','checkpointer','before','N0',1083);
INSERT INTO "numa_pages" VALUES(3,'c','other','before','N0',947);
INSERT INTO "numa_pages" VALUES(3,'c','postmaster','before','N0',22541);
INSERT INTO "numa_pages" VALUES(3,'c','startup','before','N0',2771);
INSERT INTO "numa_pages" VALUES(3,'c','walreceiver','before','N0',1718);
INSERT INTO "numa_pages" VALUES(3,'primary','autovacuum','before','N0',1601);
INSERT INTO "numa_pages" VALUES(3,'primary','bgwriter','before','N0',1149);
INSERT INTO "numa_pages" VALUES(3,'primary','checkpointer','before','N0',1073);
INSERT INTO "numa_pages" VALUES(3,'primary','other','before','N0',1013);
INSERT INTO "numa_pages" VALUES(3,'primary','postmaster','before','N0',22537);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:b','before','N0',2084);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:c','before','N0',2067);
INSERT INTO "numa_pages" VALUES(3,'primary','walwriter','before','N0',17531);
INSERT INTO "numa_pages" VALUES(3,'b','bgwriter','after','N0',1138);
INSERT INTO "numa_pages" VALUES(3,'b','checkpointer','after','N0',1080);
INSERT INTO "numa_pages" VALUES(3,'b','other','after','N0',944);
INSERT INTO "numa_pages" VALUES(3,'b','postmaster','after','N0',22552);
INSERT INTO "numa_pages" VALUES(3,'b','startup','after','N0',2926);
INSERT INTO "numa_pages" VALUES(3,'b','walreceiver','after','N0',1735);
INSERT INTO "numa_pages" VALUES(3,'c','bgwriter','after','N0',1141);
INSERT INTO "numa_pages" VALUES(3,'c','checkpointer','after','N0',1083);
INSERT INTO "numa_pages" VALUES(3,'c','other','after','N0',947);
INSERT INTO "numa_pages" VALUES(3,'c','postmaster','after','N0',22541);
INSERT INTO "numa_pages" VALUES(3,'c','startup','after','N0',2934);
INSERT INTO "numa_pages" VALUES(3,'c','walreceiver','after','N0',1718);
INSERT INTO "numa_pages" VALUES(3,'primary','autovacuum','after','N0',1601);
INSERT INTO "numa_pages" VALUES(3,'primary','bgwriter','after','N0',1165);
INSERT INTO "numa_pages" VALUES(3,'primary','checkpointer','after','N0',1073);
INSERT INTO "numa_pages" VALUES(3,'primary','other','after','N0',1013);
INSERT INTO "numa_pages" VALUES(3,'primary','postmaster','after','N0',22537);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:b','after','N0',2084);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:c','after','N0',2067);
INSERT INTO "numa_pages" VALUES(3,'primary','walwriter','after','N0',17531);
CREATE TABLE probes (
    repeat_id integer not null references repeats(id),
    probe text not null,             -- perf | activity | proc | flamegraphs | sched
    status text not null,            -- ran | skipped | failed
    reason text
);
INSERT INTO "probes" VALUES(3,'proc','ran',NULL);
INSERT INTO "probes" VALUES(3,'perf','ran',NULL);
INSERT INTO "probes" VALUES(3,'flamegraphs','ran',NULL);
INSERT INTO "probes" VALUES(3,'sched','ran',NULL);
INSERT INTO "probes" VALUES(3,'activity','ran',NULL);
CREATE TABLE proc_costs (   -- /proc per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    user_ms real not null, system_ms real not null,
    voluntary_cs integer not null, involuntary_cs integer not null
);
INSERT INTO "proc_costs" VALUES(3,'b','bgwriter',1,0.0,0.0,24,4);
INSERT INTO "proc_costs" VALUES(3,'b','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'b','other',1,0.0,0.0,30,0);
INSERT INTO "proc_costs" VALUES(3,'b','postmaster',1,0.0,0.0,1,0);
INSERT INTO "proc_costs" VALUES(3,'b','startup',1,80.0,220.0,3491,541);
INSERT INTO "proc_costs" VALUES(3,'b','walreceiver',1,70.0,670.0,10275,2796);
INSERT INTO "proc_costs" VALUES(3,'c','bgwriter',1,0.0,0.0,23,20);
INSERT INTO "proc_costs" VALUES(3,'c','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'c','other',1,0.0,0.0,30,0);
INSERT INTO "proc_costs" VALUES(3,'c','postmaster',1,0.0,0.0,1,0);
INSERT INTO "proc_costs" VALUES(3,'c','startup',1,90.0,220.0,3498,462);
INSERT INTO "proc_costs" VALUES(3,'c','walreceiver',1,70.0,6.90000000000000113676e+02,10510,1811);
INSERT INTO "proc_costs" VALUES(3,'primary','autovacuum',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'primary','backend',8,800.0,1430.0,39497,6386);
INSERT INTO "proc_costs" VALUES(3,'primary','bgwriter',1,0.0,0.0,23,8);
INSERT INTO "proc_costs" VALUES(3,'primary','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'primary','other',2,0.0,10.0,113,5);
INSERT INTO "proc_costs" VALUES(3,'primary','postmaster',1,0.0,10.0,17,1);
INSERT INTO "proc_costs" VALUES(3,'primary','walsender:b',1,50.0,650.0,7199,2590);
INSERT INTO "proc_costs" VALUES(3,'primary','walsender:c',1,50.0,460.0,8231,582);
INSERT INTO "proc_costs" VALUES(3,'primary','walwriter',1,0.0,10.0,222,21);
CREATE TABLE repeats (
    id integer primary key,
    cell_id integer not null references cells(id),
    n integer not null,
    probed integer not null default 0,  -- 1: probes ran; kept out of the cell's figures
    started_at text not null,
    duration_s real not null,
    transactions integer not null,   -- from the per-transaction logs
    failed integer not null,
    tps real not null,               -- pgbench's own figure (without connection time)
    pgbench_transactions integer,
    pgbench_latency_avg_ms real,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob not null,
    stdout_path text, stderr_path text,
    unique (cell_id, n)
);
INSERT INTO "repeats" VALUES(1,1,1,0,'2026-11-22T08:56:23.399+00:00',4.06106532800186,11460,0,2870.213743,11460,2.749,2.74920392670157065495e+00,2.4475,4.0155,8.0955,10.8155,11.472,X'53524C4801789C9DD55770555514C6F1FBDF09094948E821A80C0A233352863E94C1019562A429045144AA802045E98282D4D095DE2D80281614A9D29128A00291AE22BD171541473A2FDF7A60CDDC07B82FBF596BAFBBF73EE7EC92553A72D72F5BF1C5486C64EFBA2344220548258D072842714A50925294A60C652947792A50914A54A60AD5A84E0D6A528B277892A7A84D1DEA528FA749E719EAD3808634A231CFF21C4D684A06CD789EE6BCC08BB4E0255AF232AD684D1BDAD28EF6BC42073AD28957E94C175EA32BDDE84E0F5EE70D7AD28BDEF4A12FFDE8CF9B0C60206FF1368318CC3B0C6128C318CE084692C928463386B18C633C137897F798C824263385A94C633A3398C92C663387B9BCCF077CC847CC633E0BF898857CC2A72CE2333EE70BBE64315FF1354BF886A52C63392B58C92ABE65356B58CB3AD6B3818D6CE23B3693C5F7FCC016B6B28D1FF9899FD9CE0E7692CD2FEC62377BD8CB3EF673805FF98DDF39C81F1CE2304738CA318E7382939CE2346738CB39CE73818BFCC95FFCCD25FEE13257F897FFF89FAB5CE33A37B8C92D6E1309841062426C880F394342480C492157480E292177C813F286FCA140281852435A281CD017BF57C37DB6877B3446C646E92FC699C3192FE39CBE5F5F9FE0E25C3245E671EDF9DCFFF2BB7C9A2C281F94C5651157677149594CD6948F39CBC9A2B294AC22ABCAF2B289EBAF82AC2E1F970D645D5943D69319B2A94C77F9C6B2956C27DBC89E32D3E5FBCAB6AE9FAE2E7F581E9307E52A992D77C85DF292DC2FB3E476B945EE962BE44AD77E482E9763E43CB9442E9473E540D95F8E9243E468D95D0E92F61E5BCA0C173792F6BE5ACB74A77DCFFAB299AC2D2BCB32B2A2AC266DDD548A5267B1AD4F5B870F4B5BD725A4ADEF47E4A3AEFE215958DA3AB7E7B1F99695B69E6D7FD90567F3B2FE6CBFA5CA426E1C9B8FEDE7BC32C569FB3A59E69689329FABF3E788D5D9F914EFF256E7CF2533D9B527C91897B7FEEDDC4B71B1D527B97C82D3DAED5CB4F333D1B5E774F38C73F5D61EED9EB03A3F6F8B6D1C7B7E1BDFDF07D65F9C8B63A3C47EBE7E3E262E8E768FDD01229AAEC4','artifacts/cell-000/repeat-01/pgbench.stdout','artifacts/cell-000/repeat-01/pgbench.stderr');
INSERT INTO "repeats" VALUES(2,1,2,0,'2026-11-22T08:56:27.471+00:00',4.05925526899955,10843,0,2716.445708,10843,2.899,2.89901632389560059976e+00,2.5435,4.4475,8.3835,14.2715,16.164,X'53524C4801789C8DD57994CF6514C7F1DFFBCE2E862332D96312D362198DA961243294254BC490504ABB420925A58DAC290A6D68D546D1A2D246ABF6BD10DA93D2AA54CEE973FFE89EF33D33BF7F5EE7DEE77E9FEFF73CBFE7B94F7941EA7FBFFC8EFFB927959E6AB36C13A9949147431AD3947C0EA280D614D296C329A21DC51C4909EDE940291D398A4E1C4D67BA700C5D29A31BDD3996E3E8414F7AD19BE3E9435FFAD19F1318C0404E641083296708433989619CCC70463092533895519CC6E98CE60CCEE42CCEE61CCEE53CC6703E173096718CE7422E6202173391494CE6122E650A973195CBB982695CC9555CCD355CCB7466701D3399C56CE63097795CCF7C6EE04616B0909BB899452C6609B7702BB7713B77B094652CE74EEEE26EEEE15EEE6305F7F3000FF2100FB392553CC2A3AC660D8FF1384FF0246B798AA77986753CCB733CCF0BBCC87A36F0122FF30AAFF21AAFB391377893B7789B777897F7789F0FF8908FF8984FF894CFD8C466B6F0395BD9C676BEE04BBEE26BBEE15BBEE37B76F0033BF9919FD8C5CFFCC2AFFCC6EFFCC16EFEE42FF6F037FFB0F7AF32B3344BB70CCBB42CCBB61CAB62D52CD7AA5B2DAB6D752CCFEA5A3DAB6F0DAD9135B626966FCDACB9B5B0023BD80EB196D6CA8AACD84AAC83955A86760495D42A882BFB7C7A424CC2B89B293342ECF55961BC4AC8E7C87D646EA873AB86796B27D45597B5641D5923C4FBC906727F595F16045BC866C136F2C0902F94CD65FB60B1D4C14F95CA76B2AD2C915D642759268784B89FEC2C078479FDBDDDE530394AF60FE37D64B91C2947C83572855C1AE27572AD5C25E7C94572B5DC18E6591EE69B2F17CA9972BA9C2897C805729C9C2A67C80972B29C26C74A5F9FA172B41C2EFBCAC109795F575FF781B22CC4FE7FF9BA17857C6FD92B3CD74AB696BE9F0E934784F9BCFE5079806C297DFFFA7ECF97BEBFF3A49F1B9FDFF7ABEF6F7F7FA3F03E8F9B86F99BC8C230EEE7D2BFB36EC8D70B79AFF3735E53E6867AEF137EDEF795DE57AA49EF133E5F4EC8C7FEE67D2C3BC4DEBF627FF33AEF9B39417FAE46A88FFD333318FB7156882B9AA76AC87BBD7F7746C86727E4E3FAC4FB25DE17F1FEB3904FBADFD22A184FBADFD212ACECBD1AF3690975B1FE5F0804AEB4','artifacts/cell-000/repeat-02/pgbench.stdout','artifacts/cell-000/repeat-02/pgbench.stderr');
INSERT INTO "repeats" VALUES(3,1,3,1,'2026-11-22T08:56:31.537+00:00',4.07712772000013501383e+00,9608,0,2409.651245,9608,3.251,3.25108763530391353668e+00,3.0875,4.3835,7.5835,11.3275,14.039,X'53524C4801789C8DD4554C965118C0F1EF7FC08F104105156BDE1843E785BA79E3DC9CB139446CC54431B103031B0B50B1C50E0414EC44B1BB5B1403BBBB3B2F7CCE85CFF6ED939BDF9E789FEF70DEF79C84728E7FFE72ABFF35C7E1E9884AC9C3E128454DEA508FFA84D280301A124E231AD384A634A3392D68492B22684D1BDAD28EF67420928E74228ACE74A12BDDE84E0FA2E9492F7AD387BEF4A33F0318C8206218CC1086328C58863382918C623463184B1CE318CF04263289781248643253984A12D398CE0C66328BD9CC612EC9CC633E0B58C82216B384A52C633929AC209534D259C92A32C864356B58CB3AD6B3818D6C62335BD8CA36B2D8CE0EB2D9C92E76B387BDEC633F0738C8210E7384A31CE3382738C9294E7386B39CE33C17B8C82572B8CC1572B9CA35AE73833C6E728BDBDCE12EF7B8CF031EF288C73CE129CF78CE0B5EF28AD7BCE12DEF78CF073EF289CF7CE12BDFF8CE0F7EF28BDF380CC6180FE369F219A7F136BE26BFF133058CBF29640A9B401364824D7153DE543021A692A96CF2CBFB43342E6277790F55F77413BB7BDE4369FBF2B9C8EBBAAFFA5D6FD129FAA8BAEDB7FBE1AFFA6DDE4FF5DB3901CA20F55C09B1B0EAB37169B198CA17118B8AA5546CE7DAE3585229C7D2514BAC2F36176BAB384A39428C14A3C54471AA1823C68B19E24C314B4C57F935E25A7182D2CED92AA689D92A4E1233C55871B3B8448C1393C5756ABE5D7FAAB850B4FB304AF58D1113C43EA2DDAF81625BB1A968F7D1EE7B84D84A0C17EB8AA16298584DD4EFB7A25845B4EFA599D84ECDADA1E6D9F9216259B1AA5849B4DF5B716519D17EB7F67B0E507D816241D15FC5C12AEFA5EAD602A2BD0F7C54DD9E7BFBBC51797BBEEDBDE1A9FA7D55DDA9EA4ED5A7EF137DDFD9F53A95763D7E2EEAFA5E74759F7AA9BA9DEBA3FAECFFE3EEBE45F9BF79BD3E77FDAEE23FF109A2A4','artifacts/cell-000/repeat-03/pgbench.stdout','artifacts/cell-000/repeat-03/pgbench.stderr');
CREATE TABLE replication_samples (
    repeat_id integer not null references repeats(id),
    t_s real not null, standby text not null, sync_state text,
    write_lag_ms real, flush_lag_ms real, replay_lag_ms real, flush_lag_bytes real
);
INSERT INTO "replication_samples" VALUES(3,0.0,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,0.0,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,0.102,'b','sync',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,0.102,'c','potential',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,0.201,'b','sync',NULL,NULL,NULL,840.0);
INSERT INTO "replication_samples" VALUES(3,0.201,'c','potential',NULL,NULL,NULL,1344.0);
INSERT INTO "replication_samples" VALUES(3,0.3,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,0.3,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,0.4,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,0.4,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,0.501,'b','sync',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,0.501,'c','potential',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,0.6,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,0.6,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,0.7,'b','sync',NULL,NULL,NULL,2296.0);
INSERT INTO "replication_samples" VALUES(3,0.7,'c','potential',NULL,NULL,NULL,2296.0);
INSERT INTO "replication_samples" VALUES(3,0.8,'b','sync',NULL,NULL,NULL,1408.0);
INSERT INTO "replication_samples" VALUES(3,0.8,'c','potential',NULL,NULL,NULL,1576.0);
INSERT INTO "replication_samples" VALUES(3,0.9,'b','sync',NULL,NULL,NULL,672.0);
INSERT INTO "replication_samples" VALUES(3,0.9,'c','potential',NULL,NULL,NULL,1368.0);
INSERT INTO "replication_samples" VALUES(3,1.0,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.0,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.101,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.101,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,1.2,'b','sync',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,1.2,'c','potential',NULL,NULL,NULL,1008.0);
INSERT INTO "replication_samples" VALUES(3,1.3,'b','sync',NULL,NULL,NULL,1368.0);
INSERT INTO "replication_samples" VALUES(3,1.3,'c','potential',NULL,NULL,NULL,1368.0);
INSERT INTO "replication_samples" VALUES(3,1.401,'b','sync',NULL,NULL,NULL,1552.0);
INSERT INTO "replication_samples" VALUES(3,1.401,'c','potential',NULL,NULL,NULL,1552.0);
INSERT INTO "replication_samples" VALUES(3,1.5,'b','sync',NULL,NULL,NULL,1344.0);
INSERT INTO "replication_samples" VALUES(3,1.5,'c','potential',NULL,NULL,NULL,1344.0);
INSERT INTO "replication_samples" VALUES(3,1.6,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,1.6,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.701,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.701,'c','potential',NULL,NULL,NULL,672.0);
INSERT INTO "replication_samples" VALUES(3,1.801,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,1.801,'c','potential',NULL,NULL,NULL,1344.0);
INSERT INTO "replication_samples" VALUES(3,1.901,'b','sync',NULL,NULL,NULL,1008.0);
INSERT INTO "replication_samples" VALUES(3,1.901,'c','potential',NULL,NULL,NULL,840.0);
INSERT INTO "replication_samples" VALUES(3,2.001,'b','sync',NULL,NULL,NULL,1344.0);
INSERT INTO "replication_samples" VALUES(3,2.001,'c','potential',NULL,NULL,NULL,840.0);
INSERT INTO "replication_samples" VALUES(3,2.101,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.101,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.202,'b','sync',NULL,NULL,NULL,504.0);
INSERT INTO "replication_samples" VALUES(3,2.202,'c','potential',NULL,NULL,NULL,504.0);
INSERT INTO "replication_samples" VALUES(3,2.3,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,2.3,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.401,'b','sync',NULL,NULL,NULL,504.0);
INSERT INTO "replication_samples" VALUES(3,2.401,'c','potential',NULL,NULL,NULL,504.0);
INSERT INTO "replication_samples" VALUES(3,2.502,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.502,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.601,'b','sync',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,2.601,'c','potential',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,2.701,'b','sync',NULL,NULL,NULL,904.0);
INSERT INTO "replication_samples" VALUES(3,2.701,'c','potential',NULL,NULL,NULL,904.0);
INSERT INTO "replication_samples" VALUES(3,2.8,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,2.8,'c','potential',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,2.9,'b','sync',NULL,NULL,NULL,1032.0);
INSERT INTO "replication_samples" VALUES(3,2.9,'c','potential',NULL,NULL,NULL,864.0);
INSERT INTO "replication_samples" VALUES(3,3.001,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.001,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.1,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.1,'c','potential',NULL,NULL,NULL,1552.0);
INSERT INTO "replication_samples" VALUES(3,3.202,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.202,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.3,'b','sync',NULL,NULL,NULL,1008.0);
INSERT INTO "replication_samples" VALUES(3,3.3,'c','potential',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,3.4,'b','sync',NULL,NULL,NULL,672.0);
INSERT INTO "replication_samples" VALUES(3,3.4,'c','potential',NULL,NULL,NULL,672.0);
INSERT INTO "replication_samples" VALUES(3,3.5,'b','sync',NULL,NULL,NULL,1384.0);
INSERT INTO "replication_samples" VALUES(3,3.5,'c','potential',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,3.601,'b','sync',NULL,NULL,NULL,336.0);
INSERT INTO "replication_samples" VALUES(3,3.601,'c','potential',NULL,NULL,NULL,1176.0);
INSERT INTO "replication_samples" VALUES(3,3.7,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.7,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,3.801,'b','sync',NULL,NULL,NULL,40.0);
INSERT INTO "replication_samples" VALUES(3,3.801,'c','potential',NULL,NULL,NULL,1216.0);
INSERT INTO "replication_samples" VALUES(3,3.9,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,3.9,'c','potential',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,4.0,'b','sync',NULL,NULL,NULL,168.0);
INSERT INTO "replication_samples" VALUES(3,4.0,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.1,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.1,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.2,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.2,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.3,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.3,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.4,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.4,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.5,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.5,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.6,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.6,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.7,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.7,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.8,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.8,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.9,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,4.9,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.0,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.0,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.1,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.1,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.2,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.2,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.3,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.3,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.4,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.4,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.5,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.5,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.6,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.6,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.7,'b','sync',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,5.7,'c','potential',NULL,NULL,NULL,0.0);
CREATE TABLE runs (
    id integer primary key,
    name text not null,
    started_at text not null,
    finished_at text,
    status text not null,            -- running | done | interrupted | failed
    spec_toml text not null,
    machine_json text not null,
    tool_version text not null
);
INSERT INTO "runs" VALUES(1,'pg96-on','2026-11-22T08:56:20.640+00:00','2026-11-22T08:56:40.238+00:00','done','# A small real run kept as test data: PostgreSQL 9.6 (an epoll set built per
# wait, no SyncRep wait event), standbys b and c with ''1(b,c)'', 8 clients.
name = "pg96-on"

[topology]
standbys = 2

[workload]
clients = 8
duration = 4
warmup = 1

[matrix]
pg = ["9.6"]
synchronous_commit = ["on"]

[run]
repeats_min = 2
repeats_max = 2
','{"hostname": "vm", "kernel": "Linux 6.18.44-fc-v595", "kernel_version": "#1 SMP PREEMPT_DYNAMIC @0", "arch": "x86_64", "cpu_model": "AMD EPYC", "cpu_count": 2, "cpus_usable": 2, "memory_bytes": 25276514304, "python": "3.11.7", "syncrep_lab": "0.1.0", "euid": 0}','0.1.0');
CREATE TABLE samples (
    repeat_id integer not null references repeats(id),
    t_s real not null, tps real not null, latency_ms real, stddev_ms real,
    failed integer not null default 0
);
INSERT INTO "samples" VALUES(1,1.0,2863.7,2.702,1.084,0);
INSERT INTO "samples" VALUES(1,2.0,2986.0,2.659,1.223,0);
INSERT INTO "samples" VALUES(1,3.0,2946.9,2.674,1.123,0);
INSERT INTO "samples" VALUES(1,4.0,2656.0,2.982,1.46,0);
INSERT INTO "samples" VALUES(2,1.0,2172.9,3.567,1.808,0);
INSERT INTO "samples" VALUES(2,2.0,2777.4,2.842,1.317,0);
INSERT INTO "samples" VALUES(2,3.0,2994.7,2.634,1.34,0);
INSERT INTO "samples" VALUES(3,1.0,2274.7,3.388,1.128,0);
INSERT INTO "samples" VALUES(3,2.0,2525.3,3.104,0.958,0);
INSERT INTO "samples" VALUES(3,3.0,2466.7,3.194,1.072,0);
INSERT INTO "samples" VALUES(3,4.0,2331.5,3.333,1.257,0);
CREATE TABLE sched_roles (   -- scheduler trace per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, threads integer not null,
    cpu_ms real not null, sleep_ms real not null, runq_ms real not null,
    switches integer not null, voluntary integer not null,
    wakeups_received integer not null, duration_s real not null
);
INSERT INTO "sched_roles" VALUES(3,'-','kernel',10,3.01096000039251521229e+02,2.68436050001546391277e+04,113.240999802656,9377,9348,8742,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'-','other',26,7.74316999879374634474e+02,5.656950800004051416e+04,3.60680000063439365476e+02,1428,1103,969,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'b','bgwriter',1,1.43799999568727798759e+00,2582.81100000022,5.33600000198930501937e+00,16,15,12,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'b','other',1,1.18000000293250195682e+00,2.9866480000055162236e+03,2.41899998945882543921e+00,20,20,20,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'b','startup',1,2.33935000076598953455e+02,2.29024799988110316917e+03,4.64519000030122697353e+02,3116,2684,2684,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'b','walreceiver',1,557.29500018424,1.20233199992071604356e+03,1.00936599997658049687e+03,10006,7884,6768,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'c','bgwriter',1,1.74399999741581268608e+00,2.73739700000078300945e+03,5.12100000196369364857e+00,27,15,14,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'c','other',1,1.47799999103881418704e+00,2.94215600000461563467e+03,0.852000004670117,21,21,21,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'c','startup',1,2.36000999986572423949e+02,2.30368900005123578011e+03,4.42516999970393953844e+02,3073,2698,2698,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'c','walreceiver',1,5.46391999992920318618e+02,1.29439299983641831204e+03,9.39182000140135642141e+02,9267,8049,7043,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'client','pgbench',2,2.39044000121793942525e+02,4.38645000005271867848e+03,1379.99699982538,5502,4111,4112,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','backend',8,1.61908899997433763928e+03,1.5596985000258428045e+04,6.33388799978274619206e+03,36349,31373,29780,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','bgwriter',1,1.43500000558560714125e+00,2.91934399999809102155e+03,4.08999999490333721041e+00,23,15,15,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','other',1,4.2250000115018337965e+00,2.99154699999417061917e+03,9.92899999255314469337e+00,79,75,75,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','postmaster',1,2.54199999471893534064e+00,3.00332600000547245144e+03,4.0900000021792948246e-01,4,3,3,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','walsender:b',1,5.45034000129817286506e+02,1.58570900011909543536e+03,8.44766999787680106237e+02,7497,5402,5402,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','walsender:c',1,3.67008999870449770241e+02,1.76862400001846253871e+03,844.545000094513,6685,6291,6291,3.00643299999865121208e+00);
INSERT INTO "sched_roles" VALUES(3,'primary','walwriter',1,1.07929999940097332e+01,2.6731680000084452331e+03,3.66460000004735775291e+01,211,190,183,3.00643299999865121208e+00);
CREATE TABLE stack_frames (   -- frames over 1 % of a role's on-CPU time
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, frame text not null,
    inclusive_us integer not null, self_us integer not null
);
INSERT INTO "stack_frames" VALUES(3,'b','startup','[postgres]',272727,30303);
INSERT INTO "stack_frames" VALUES(3,'b','startup','StartupProcessMain',242424,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','AuxiliaryProcessMain',242424,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','StartupXLOG',242424,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','XLogReadRecord',212121,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','do_syscall_64_[k]',191919,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','entry_SYSCALL_64_after_hwframe_[k]',191919,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','WaitLatchOrSocket',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','WaitEventSetWait',70707,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','epoll_wait',70707,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__GI___libc_read',50505,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','FreeWaitEventSet',50505,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__fput_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__x64_sys_close_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__GI___close',50505,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','XLogReadBufferForRedoExtended',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','XLogReadBufferExtended',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','finish_task_switch.isra.0_[k]',30303,30303);
INSERT INTO "stack_frames" VALUES(3,'b','startup','ep_eventpoll_release_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__schedule_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','ep_clear_and_put_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','arch_do_signal_or_restart_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','exit_to_user_mode_loop_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','vfs_read_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','filemap_read_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','touch_atime_[k]',30303,10101);
INSERT INTO "stack_frames" VALUES(3,'b','startup','ksys_read_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','ReadBufferWithoutRelcache',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','RecordKnownAssignedTransactionIds',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','HandleStartupProcInterrupts',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','PostmasterIsAlive',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','perf_syscall_enter_[k]',20202,10101);
INSERT INTO "stack_frames" VALUES(3,'b','startup','syscall_trace_enter_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','AddWaitEventToSet',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','do_epoll_ctl_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__GI_epoll_ctl',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','__x64_sys_epoll_ctl_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','_raw_spin_unlock_irqrestore_[k]',20202,20202);
INSERT INTO "stack_frames" VALUES(3,'b','startup','dput_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','startup','schedule_hrtimeout_range_clock_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__GI___select',868686,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','AuxiliaryProcessMain',868686,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','WalReceiverMain',868686,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','[postgres]',868686,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','[libc.so.6]',868686,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','do_syscall_64_[k]',767676,20202);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','entry_SYSCALL_64_after_hwframe_[k]',767676,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','issue_xlog_fsync',454545,20202);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__GI_fdatasync',434343,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','ext4_sync_file_[k]',424242,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','do_fsync_[k]',424242,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__x64_sys_fdatasync_[k]',424242,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','ext4_fsync_nojournal.constprop.0_[k]',292929,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','finish_task_switch.isra.0_[k]',262626,232323);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__schedule_[k]',262626,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','schedule_[k]',262626,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','generic_buffers_fsync_noflush_[k]',262626,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','file_write_and_wait_range_[k]',262626,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','[libpqwalreceiver.so]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','[libpq.so.5.9]',212121,10101);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__libc_send',171717,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','_raw_spin_unlock_irqrestore_[k]',161616,141414);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__blk_flush_plug_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_mq_run_hw_queue_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_mq_flush_plug_list_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_mq_sched_dispatch_requests_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__blk_mq_sched_dispatch_requests_[k]',161616,10101);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_mq_dispatch_list_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','virtio_queue_rq_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_mq_dispatch_rq_list_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','do_writepages_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','ext4_writepages_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','ext4_do_writepages_[k]',151515,10101);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__filemap_fdatawrite_range_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','filemap_fdatawrite_wbc_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','blk_finish_plug_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','__irq_exit_rcu_[k]',131313,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','handle_softirqs_[k]',131313,80808);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','vp_notify_[k]',131313,0);
INSERT INTO "stack_frames" VALUES(3,'b','walreceiver','iowrite16_[k]',131313,111111);
INSERT INTO "stack_frames" VALUES(3,'c','startup','[postgres]',272727,20202);
INSERT INTO "stack_frames" VALUES(3,'c','startup','StartupProcessMain',252525,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','AuxiliaryProcessMain',252525,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','StartupXLOG',252525,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','do_syscall_64_[k]',191919,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','entry_SYSCALL_64_after_hwframe_[k]',191919,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','XLogReadRecord',151515,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','WaitLatchOrSocket',131313,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','WaitEventSetWait',90909,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__GI___libc_read',80808,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','epoll_wait',80808,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','HandleStartupProcInterrupts',70707,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','PostmasterIsAlive',70707,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','syscall_trace_enter_[k]',50505,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','finish_task_switch.isra.0_[k]',50505,50505);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__schedule_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','schedule_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','schedule_hrtimeout_range_clock_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','do_epoll_wait_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__x64_sys_epoll_wait_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','perf_syscall_enter_[k]',40404,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','perf_tp_event_[k]',30303,20202);
INSERT INTO "stack_frames" VALUES(3,'c','startup','CreateWaitEventSet',30303,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__GI_epoll_create1',30303,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','[libc.so.6]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','vfs_read_[k]',20202,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','ksys_read_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','asm_common_interrupt_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','common_interrupt_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__irq_exit_rcu_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','handle_softirqs_[k]',20202,20202);
INSERT INTO "stack_frames" VALUES(3,'c','startup','anon_inode_getfile_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__x64_sys_epoll_create1_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','do_epoll_create_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','alloc_file_pseudo_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','exit_to_user_mode_loop_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','__GI___libc_write',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','xact_redo',20202,0);
INSERT INTO "stack_frames" VALUES(3,'c','startup','LWLockRelease',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'c','startup','UnlockReleaseBuffer',10101,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__GI___select',848484,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','AuxiliaryProcessMain',848484,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','WalReceiverMain',848484,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','[postgres]',848484,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','[libc.so.6]',848484,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','do_syscall_64_[k]',767676,10101);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','entry_SYSCALL_64_after_hwframe_[k]',767676,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','ext4_sync_file_[k]',505050,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','issue_xlog_fsync',505050,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__GI_fdatasync',505050,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','do_fsync_[k]',505050,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__x64_sys_fdatasync_[k]',505050,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','ext4_fsync_nojournal.constprop.0_[k]',363636,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','generic_buffers_fsync_noflush_[k]',252525,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','file_write_and_wait_range_[k]',252525,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__blk_flush_plug_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_mq_flush_plug_list_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_mq_dispatch_list_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_mq_run_hw_queue_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_mq_sched_dispatch_requests_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__blk_mq_sched_dispatch_requests_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','finish_task_switch.isra.0_[k]',202020,181818);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__schedule_[k]',202020,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','virtio_queue_rq_[k]',202020,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_mq_dispatch_rq_list_[k]',202020,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','schedule_[k]',191919,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','vp_notify_[k]',181818,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','iowrite16_[k]',181818,181818);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','virtqueue_notify_[k]',181818,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','_raw_spin_unlock_irqrestore_[k]',161616,131313);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','submit_bio_noacct_nocheck_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__submit_bio_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','do_writepages_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','ext4_writepages_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','ext4_do_writepages_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','__filemap_fdatawrite_range_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','filemap_fdatawrite_wbc_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','submit_bio_wait_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blkdev_issue_flush_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'c','walreceiver','blk_finish_plug_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','do_syscall_64_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','entry_SYSCALL_64_after_hwframe_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','[pgbench]',101010,30303);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__x64_sys_ppoll_[k]',70707,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','do_sys_poll_[k]',70707,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__ppoll',70707,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__libc_send',60606,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','start_thread',60606,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__x64_sys_sendto_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','unix_stream_sendmsg_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__sys_sendto_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','finish_task_switch.isra.0_[k]',50505,50505);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__schedule_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','schedule_hrtimeout_range_clock_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','schedule_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','poll_schedule_timeout.constprop.0_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','_raw_spin_unlock_irqrestore_[k]',40404,40404);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','sock_def_readable_[k]',40404,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__libc_recv',30303,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__vfprintf_internal',30303,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__printf_fp_spec',30303,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','sock_recvmsg_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__sys_recvfrom_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__x64_sys_recvfrom_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','unix_stream_recvmsg_[k]',20202,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__GI___printf_fp_l',20202,20202);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','consume_skb_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','skb_release_head_state_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','unix_stream_read_generic_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','sock_wfree_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','unix_write_space_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','syscall_exit_work_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','sock_alloc_send_pskb_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','skb_set_owner_w_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','__wake_up_sync_key_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','_raw_spin_lock_irqsave_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','exit_to_user_mode_loop_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','handle_softirqs_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','asm_sysvec_apic_timer_interrupt_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'client','pgbench','sysvec_apic_timer_interrupt_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','PostgresMain',2141412,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','[postgres]',2080806,50505);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','CommitTransactionCommand',1414140,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','do_syscall_64_[k]',1323231,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','entry_SYSCALL_64_after_hwframe_[k]',1323231,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','XLogFlush',888888,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','finish_task_switch.isra.0_[k]',434343,404040);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__schedule_[k]',434343,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','schedule_[k]',434343,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','ext4_sync_file_[k]',404040,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','issue_xlog_fsync',404040,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__GI_fdatasync',404040,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','do_fsync_[k]',404040,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__x64_sys_fdatasync_[k]',404040,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','SyncRepWaitForLSN',393939,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','WaitLatchOrSocket',353535,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','schedule_hrtimeout_range_clock_[k]',323232,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','ext4_fsync_nojournal.constprop.0_[k]',323232,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','PortalRun',313131,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__semtimedop',313131,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','semtimedop_syscall',313131,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','WaitEventSetWait',303030,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','epoll_wait',292929,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','do_semtimedop_[k]',272727,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__do_semtimedop_[k]',252525,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','generic_buffers_fsync_noflush_[k]',252525,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','file_write_and_wait_range_[k]',252525,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','do_writepages_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','ext4_writepages_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','ext4_do_writepages_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__filemap_fdatawrite_range_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','filemap_fdatawrite_wbc_[k]',232323,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','LWLockAcquireOrWait',222222,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','__blk_flush_plug_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','blk_mq_run_hw_queue_[k]',222222,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','blk_mq_flush_plug_list_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','blk_mq_dispatch_list_[k]',222222,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','PGSemaphoreLock',212121,20202);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','virtio_queue_rq_[k]',212121,0);
INSERT INTO "stack_frames" VALUES(3,'primary','backend','blk_mq_sched_dispatch_requests_[k]',212121,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','__GI___select',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','do_syscall_64_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','WaitLatchOrSocket',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','pgstat_start',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','entry_SYSCALL_64_after_hwframe_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','[postgres]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','[libc.so.6]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','__x64_sys_epoll_ctl_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','__GI_epoll_ctl',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','AddWaitEventToSet',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','do_epoll_ctl_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','other','ep_send_events_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','epoll_wait',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','ep_item_poll.isra.0_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','do_epoll_wait_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','fput_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','other','__x64_sys_epoll_wait_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','other','WaitEventSetWait',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','release_task_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','do_syscall_64_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','proc_invalidate_siblings_dcache_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','__raw_callee_save___pv_queued_spin_unlock_[k]',10101,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','do_wait_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','shrink_dentry_list_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','iput_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','__dentry_kill_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','entry_SYSCALL_64_after_hwframe_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','_raw_spin_unlock_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','__do_wait_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','kernel_wait4_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','wait_consider_task_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','d_invalidate_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','[libc.so.6]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','shrink_dcache_parent_[k]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','__GI___select',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','__GI___wait4',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','postmaster','[postgres]',10101,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','PostgresMain',565656,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','exec_replication_command',565656,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','[postgres]',565656,20202);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','do_syscall_64_[k]',505050,40404);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','entry_SYSCALL_64_after_hwframe_[k]',505050,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','WaitLatchOrSocket',323232,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','WaitEventSetWait',212121,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','epoll_wait',212121,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','finish_task_switch.isra.0_[k]',161616,141414);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__schedule_[k]',161616,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','schedule_[k]',151515,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','do_epoll_wait_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__x64_sys_epoll_wait_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','schedule_hrtimeout_range_clock_[k]',111111,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','SyncRepReleaseWaiters',111111,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__GI_kill',101010,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','_raw_spin_unlock_irqrestore_[k]',101010,101010);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','exit_to_user_mode_loop_[k]',90909,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','kill_something_info_[k]',80808,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__x64_sys_kill_[k]',80808,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','do_send_sig_info_[k]',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','kill_pid_info_type_[k]',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__libc_recv',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','secure_read',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__x64_sys_recvfrom_[k]',60606,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','asm_common_interrupt_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','common_interrupt_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__irq_exit_rcu_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','handle_softirqs_[k]',50505,40404);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__sys_recvfrom_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','sock_recvmsg_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','unix_stream_read_generic_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','unix_stream_recvmsg_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__GI_epoll_ctl',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','AddWaitEventToSet',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','arch_do_signal_or_restart_[k]',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','FreeWaitEventSet',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__GI___close',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','secure_write',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:b','__libc_send',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','PostgresMain',535353,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','exec_replication_command',535353,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','[postgres]',535353,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','do_syscall_64_[k]',454545,30303);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','entry_SYSCALL_64_after_hwframe_[k]',454545,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','WaitLatchOrSocket',383838,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','WaitEventSetWait',171717,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','epoll_wait',171717,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','finish_task_switch.isra.0_[k]',141414,141414);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','schedule_hrtimeout_range_clock_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','do_epoll_wait_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__schedule_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__x64_sys_epoll_wait_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','schedule_[k]',141414,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','CreateWaitEventSet',70707,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','FreeWaitEventSet',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__GI___close',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__x64_sys_close_[k]',70707,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__GI_epoll_ctl',60606,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','AddWaitEventToSet',60606,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__GI_epoll_create1',60606,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__fput_[k]',60606,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','secure_read',60606,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__x64_sys_epoll_ctl_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','do_epoll_ctl_[k]',50505,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','ep_clear_and_put_[k]',50505,10101);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','ep_eventpoll_release_[k]',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','kmem_cache_free_[k]',50505,40404);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','pq_getbyte_if_available',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__libc_recv',50505,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','_raw_spin_unlock_irqrestore_[k]',40404,40404);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','exit_to_user_mode_loop_[k]',40404,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','alloc_file_pseudo_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','do_epoll_create_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','anon_inode_getfile_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__x64_sys_epoll_create1_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__sys_recvfrom_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__x64_sys_recvfrom_[k]',30303,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','PostmasterIsAlive',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walsender:c','__GI___libc_read',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','finish_task_switch.isra.0_[k]',20202,20202);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','do_syscall_64_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','schedule_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','schedule_hrtimeout_range_clock_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','AuxiliaryProcessMain',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','epoll_wait',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','WalWriterMain',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','entry_SYSCALL_64_after_hwframe_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','do_epoll_wait_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','__schedule_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','WaitLatchOrSocket',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','[libc.so.6]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','__x64_sys_epoll_wait_[k]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','__GI___select',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','[postgres]',20202,0);
INSERT INTO "stack_frames" VALUES(3,'primary','walwriter','WaitEventSetWait',20202,0);
CREATE TABLE waits (   -- pg_stat_activity samples per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, wait_type text not null,
    wait_event text not null, samples integer not null, ticks integer not null
);
INSERT INTO "waits" VALUES(3,'primary','backend','CPU','running',385,116);
INSERT INTO "waits" VALUES(3,'primary','backend','Client','idle',101,116);
INSERT INTO "waits" VALUES(3,'primary','backend','LWLockNamed','WALWriteLock',153,116);
INSERT INTO "waits" VALUES(3,'primary','backend','LWLockNamed','XidGenLock',1,116);
INSERT INTO "waits" VALUES(3,'primary','walsender:b','CPU','running',116,116);
INSERT INTO "waits" VALUES(3,'primary','walsender:c','CPU','running',116,116);
CREATE TABLE wakeups (   -- who woke whom, during the traced seconds
    repeat_id integer not null references repeats(id),
    waker_node text not null, waker_role text not null,
    wakee_node text not null, wakee_role text not null,
    count integer not null, duration_s real not null
);
INSERT INTO "wakeups" VALUES(3,'-','idle/irq','-','kernel',30,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','idle/irq','-','other',57,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','idle/irq','primary','backend',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','idle/irq','primary','bgwriter',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','idle/irq','primary','walwriter',20,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','-','kernel',78,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','-','other',46,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','b','startup',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','b','walreceiver',196,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','c','startup',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','c','walreceiver',226,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','primary','backend',150,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','kernel','primary','walwriter',8,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','-','kernel',72,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','-','other',452,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','b','bgwriter',4,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','b','other',5,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','b','walreceiver',180,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','c','other',6,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','c','startup',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','c','walreceiver',171,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','primary','backend',316,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','primary','other',8,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','primary','walsender:c',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'-','other','primary','walwriter',7,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','bgwriter','b','other',15,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','bgwriter','b','walreceiver',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','bgwriter','c','walreceiver',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','bgwriter','primary','backend',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','bgwriter','primary','walwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','-','kernel',37,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','-','other',15,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','b','walreceiver',118,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','c','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','c','walreceiver',213,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','primary','backend',175,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','primary','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','startup','primary','walwriter',5,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','-','kernel',2564,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','-','other',39,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','b','bgwriter',5,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','b','startup',2681,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','b','walreceiver',4,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','c','bgwriter',4,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','c','walreceiver',2338,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','primary','backend',1433,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','primary','walsender:b',3369,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'b','walreceiver','primary','walwriter',9,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','bgwriter','-','kernel',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','bgwriter','b','walreceiver',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','bgwriter','c','other',15,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','bgwriter','c','walreceiver',4,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','bgwriter','primary','backend',5,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','other','b','walreceiver',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','other','c','walreceiver',4,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','other','primary','backend',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','-','kernel',77,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','-','other',22,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','b','walreceiver',327,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','c','walreceiver',246,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','primary','backend',314,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','primary','bgwriter',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','startup','primary','walwriter',8,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','-','kernel',2590,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','-','other',37,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','b','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','b','startup',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','b','walreceiver',2089,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','c','bgwriter',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','c','startup',2692,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','c','walreceiver',7,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','client','pgbench',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','primary','backend',1239,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','primary','walsender:c',3726,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'c','walreceiver','primary','walwriter',20,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','-','kernel',25,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','-','other',35,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','b','walreceiver',39,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','c','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','c','walreceiver',35,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','client','pgbench',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','primary','backend',6937,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','primary','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','primary','postmaster',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','primary','walsender:c',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'client','pgbench','primary','walwriter',11,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','-','kernel',2933,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','-','other',190,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','b','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','b','walreceiver',707,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','c','bgwriter',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','c','startup',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','c','walreceiver',664,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','client','pgbench',4110,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','backend',10396,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','bgwriter',6,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','other',52,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','walsender:b',2030,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','walsender:c',2397,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','backend','primary','walwriter',68,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','bgwriter','primary','other',15,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','other','-','other',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','other','primary','walwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','-','kernel',292,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','-','other',39,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','b','bgwriter',1,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','b','walreceiver',3025,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','c','bgwriter',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','c','startup',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','c','walreceiver',1489,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','primary','backend',8686,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','primary','walsender:c',165,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:b','primary','walwriter',15,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','-','kernel',36,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','-','other',33,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','b','walreceiver',59,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','c','walreceiver',1634,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','primary','backend',92,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','primary','bgwriter',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','primary','walsender:b',3,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walsender:c','primary','walwriter',10,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','-','kernel',6,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','-','other',2,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','b','walreceiver',20,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','c','walreceiver',10,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','primary','backend',30,3.00643299999865121208e+00);
INSERT INTO "wakeups" VALUES(3,'primary','walwriter','primary','walsender:c',1,3.00643299999865121208e+00);
CREATE INDEX samples_by_repeat on samples(repeat_id);
CREATE VIEW cell_results as
    select r.name as run, c.idx, c.label, c.status, c.repeats, c.stop_reason,
           c.tps_mean, c.tps_ci_low, c.tps_ci_high, c.tps_ci_rel,
           c.lat_mean_ms, c.lat_p50_ms, c.lat_p90_ms, c.lat_p99_ms, c.lat_p999_ms,
           c.lat_max_ms, c.transactions, c.failed, c.axes_json, c.params_json, c.error
    from cells c join runs r on r.id = c.run_id;
COMMIT;
