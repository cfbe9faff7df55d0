-- q7, highest bid: the bids with the highest price of their 10-second tumbling window.
-- nexmark-flink joins the bids with each window's maximum on the price and bounds the
-- bid's time to the 10 seconds up to the window's end, both ends included; here the join
-- is a window join — each bid with its own window's maximum, on the window and the price —
-- emitted when the window closes. (Flink's bounds also let a bid at exactly a window's end,
-- which belongs to the next window, match the earlier window's maximum.)
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) B
JOIN (
  SELECT MAX(price) AS maxprice, window_start, window_end
  FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
  GROUP BY window_start, window_end
) B1
ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.price = B1.maxprice;
