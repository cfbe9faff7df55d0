-- s1, the state of an aggregation without a window at a million keys (rsql's own, not a
-- Nexmark query): per (bidder, auction), its bids, highest and total price. The pairs are
-- about 1 M at 3.4 M events and 2.9 M at 10 M; each bid updates its pair's row.
SELECT bidder, auction, COUNT(*) AS bids, MAX(price) AS top, SUM(price) AS total
FROM bid
GROUP BY bidder, auction;
