-- q15, bidding statistics per day: bids, bidders and auctions, in all and by price range.
-- nexmark-flink's COUNT(*) FILTER (WHERE p) is written SUM(CASE WHEN p THEN 1 ELSE 0 END),
-- and COUNT(DISTINCT x) FILTER (WHERE p) as COUNT(DISTINCT CASE WHEN p THEN x END).
-- Without a window the aggregation emits the updated row of its group for every bid.
SELECT DATE_FORMAT(date_time, '%Y-%m-%d') AS `day`,
       COUNT(*) AS total_bids,
       SUM(CASE WHEN price < 10000 THEN 1 ELSE 0 END) AS rank1_bids,
       SUM(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 ELSE 0 END) AS rank2_bids,
       SUM(CASE WHEN price >= 1000000 THEN 1 ELSE 0 END) AS rank3_bids,
       COUNT(DISTINCT bidder) AS total_bidders,
       COUNT(DISTINCT CASE WHEN price < 10000 THEN bidder END) AS rank1_bidders,
       COUNT(DISTINCT CASE WHEN price >= 10000 AND price < 1000000 THEN bidder END) AS rank2_bidders,
       COUNT(DISTINCT CASE WHEN price >= 1000000 THEN bidder END) AS rank3_bidders,
       COUNT(DISTINCT auction) AS total_auctions,
       COUNT(DISTINCT CASE WHEN price < 10000 THEN auction END) AS rank1_auctions,
       COUNT(DISTINCT CASE WHEN price >= 10000 AND price < 1000000 THEN auction END) AS rank2_auctions,
       COUNT(DISTINCT CASE WHEN price >= 1000000 THEN auction END) AS rank3_auctions
FROM bid
GROUP BY DATE_FORMAT(date_time, '%Y-%m-%d');
