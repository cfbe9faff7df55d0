-- q10, log to file system: every bid with its day and minute as partition columns.
-- nexmark-flink writes them to a file sink partitioned by (dt, hm); here the rows go to the
-- bench's discarding sink, so this measures the projection, not the file writing.
SELECT auction, bidder, price, date_time, extra,
       DATE_FORMAT(date_time, '%Y-%m-%d') AS dt, DATE_FORMAT(date_time, '%H:%i') AS hm
FROM bid;
