-- q14, calculation: bids in a price range, with the time of day and the number of 'c' in
-- extra. nexmark-flink's HOUR(t) is EXTRACT(HOUR FROM t), and its count_char(extra, 'c')
-- user function the length of extra less its length without the 'c's.
SELECT auction, bidder, 0.908 * price AS price,
       CASE
         WHEN EXTRACT(HOUR FROM date_time) >= 8 AND EXTRACT(HOUR FROM date_time) <= 18 THEN 'dayTime'
         WHEN EXTRACT(HOUR FROM date_time) <= 6 OR EXTRACT(HOUR FROM date_time) >= 20 THEN 'nightTime'
         ELSE 'otherTime'
       END AS bid_time_type,
       date_time, extra,
       LENGTH(extra) - LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
