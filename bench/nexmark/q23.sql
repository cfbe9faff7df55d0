-- q23, multi-way join (not in the original suite): the bids of people who also sell, with
-- the person and each of their auctions. Two regular joins of streams (bid ⋈ person on the
-- bidder, then ⋈ auction on the seller), with the state TTL each needs.
SET state_ttl = '1 minute';
SELECT bidder, price, channel, url, B.extra AS bid_extra,
       P.id AS person_id, name, email_address, credit_card, city, state, P.extra AS person_extra,
       item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires,
       seller, category, A.extra AS auction_extra
FROM bid B
  JOIN person P ON P.id = B.bidder
  JOIN auction A ON A.seller = B.bidder;
