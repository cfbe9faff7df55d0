-- q11, user sessions: how many bids each user makes while active, a session ending after
-- 10 seconds without a bid.
SELECT bidder, COUNT(*) AS bid_count,
       SESSION_START(date_time, INTERVAL '10' SECOND) AS starttime,
       SESSION_END(date_time, INTERVAL '10' SECOND) AS endtime
FROM bid
GROUP BY bidder, SESSION(date_time, INTERVAL '10' SECOND);
