-- q19, auction Top-10 price: the ten highest bids of each auction. nexmark-flink ranks
-- each auction's bids over the whole stream and retracts a row when a higher bid pushes it
-- out; rsql emits append-only results, so its Top-N is per window: the ten highest bids of
-- each auction in each 10-second tumbling window, emitted, numbered, when the window
-- closes. (At the suite's 10 M events per second of event time a run of 10 M events is one
-- such window, so the result is the final Top-10 of the whole run.) Ties in price are
-- broken by time and bidder so that the result does not depend on arrival order.
SELECT auction, bidder, price, channel, url, date_time, extra, rank_number
FROM (SELECT auction, bidder, price, channel, url, date_time, extra, window_start, window_end,
             ROW_NUMBER() OVER (PARTITION BY auction, window_start, window_end
                                ORDER BY price DESC, date_time, bidder) AS rank_number
      FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)) b
WHERE rank_number <= 10;
