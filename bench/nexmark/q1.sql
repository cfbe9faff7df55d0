-- q1, currency conversion: bid prices in euro (a projection with arithmetic).
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
