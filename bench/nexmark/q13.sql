-- q13, bounded side input join: each bid with the value of its auction modulo 10,000 in
-- the side input, a table read from a file (ddl.sql) and joined in processing time. The
-- file is read whole when the job starts and looked up by key (docs/sql.md, "Lookup
-- joins"); nexmark-flink's PROCTIME() column is PROCTIME() in FOR SYSTEM_TIME AS OF.
SELECT B.auction, B.bidder, B.price, B.date_time, S.value
FROM bid AS B
JOIN side_input FOR SYSTEM_TIME AS OF PROCTIME() AS S
ON MOD(B.auction, 10000) = S.key;
