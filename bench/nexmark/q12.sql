-- q12, processing-time windows: bids per user in 10-second windows of processing time.
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TUMBLE(bid_proctime, p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
