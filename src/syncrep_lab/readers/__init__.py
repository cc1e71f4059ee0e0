"""What the clients and the kernel print, read into numbers: pgbench's logs and summary,
sysbench's output, the disks' and interfaces' counters, and one timeline per repeat."""
