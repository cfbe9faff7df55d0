-- q17, auction statistics per day: bids by price range and the price's min, max, average
-- and sum, per auction and day (emitted on every bid, like q15).
SELECT auction,
       DATE_FORMAT(date_time, '%Y-%m-%d') AS `day`,
       COUNT(*) AS total_bids,
       SUM(CASE WHEN price < 10000 THEN 1 ELSE 0 END) AS rank1_bids,
       SUM(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 ELSE 0 END) AS rank2_bids,
       SUM(CASE WHEN price >= 1000000 THEN 1 ELSE 0 END) AS rank3_bids,
       MIN(price) AS min_price,
       MAX(price) AS max_price,
       AVG(price) AS avg_price,
       SUM(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(date_time, '%Y-%m-%d');
