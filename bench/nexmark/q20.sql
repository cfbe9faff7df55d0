-- q20, expand bid with auction: the bids on auctions of category 10, each with its
-- auction's fields. A regular join of two streams (bid ⋈ auction on the auction's id),
-- as nexmark-flink writes it, with the state TTL a join without a time bound needs in
-- rsql. A bid names one of the 100 newest auctions or one of the next 10 (docs/nexmark.md):
-- an auction is needed for the next ~1,900 events, a bid for the next ~170, far less than
-- one minute of event time at any event rate from 100 events per second up.
SET state_ttl = '1 minute';
SELECT auction, bidder, price, channel, url, B.date_time, B.extra,
       item_name, description, initial_bid, reserve, A.date_time, expires, seller, category, A.extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
