-- q18, find last bid: the last bid of each bidder on each auction. Deduplication keeping
-- the last row (ROW_NUMBER() ... ORDER BY date_time DESC, rn = 1): each bid later than its
-- (bidder, auction)'s current one is emitted at once as the pair's new last bid, so the
-- output is an upsert stream keyed by (bidder, auction), as Flink's is. Over a stream the
-- keys are kept for the state TTL: a pair that bids again an hour of event time after its
-- last bid starts afresh (its bid is emitted, as it would be anyway).
SET state_ttl = '1 hour';
SELECT auction, bidder, price, channel, url, date_time, extra
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number
      FROM bid) b
WHERE rank_number <= 1;
