//! A minimal raw-deflate (RFC 1951) decoder for the deflate tests: it decodes what a deflater
//! emitted and reports the longest match distance, to prove that a 9-bit deflater never refers
//! further back than an 8-bit window allows (see the `deflate` module docs).

use crate::deflate::SYNC_TAIL;

/// Reads a deflate stream bit by bit, least significant bit first.
struct BitReader<'a> {
    data: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    fn bits(&mut self, n: u32) -> u32 {
        let mut v = 0;
        for k in 0..n {
            let byte = self.data[self.bit / 8];
            v |= u32::from((byte >> (self.bit % 8)) & 1) << k;
            self.bit += 1;
        }
        v
    }
    fn align(&mut self) {
        self.bit = self.bit.div_ceil(8) * 8;
    }
}

/// Canonical Huffman code: per-length counts and symbols in code order.
struct Huffman {
    counts: [u16; 16],
    symbols: Vec<u16>,
}

impl Huffman {
    fn new(lengths: &[u8]) -> Self {
        let mut counts = [0u16; 16];
        for &l in lengths {
            counts[l as usize] += 1;
        }
        counts[0] = 0;
        let mut offsets = [0u16; 16];
        for l in 1..15 {
            offsets[l + 1] = offsets[l] + counts[l];
        }
        let mut symbols = vec![0u16; lengths.len()];
        for (sym, &l) in lengths.iter().enumerate() {
            if l != 0 {
                symbols[offsets[l as usize] as usize] = sym as u16;
                offsets[l as usize] += 1;
            }
        }
        Huffman { counts, symbols }
    }

    fn decode(&self, br: &mut BitReader) -> u16 {
        // Codes of one length are consecutive; walk lengths 1..=15.
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= br.bits(1) as i32;
            let count = i32::from(self.counts[len]);
            if code - first < count {
                return self.symbols[(index + code - first) as usize];
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        panic!("bad huffman code");
    }
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Decode one message payload (tail re-appended) onto `history`; returns
/// the largest match distance seen. `history` holds all previous output
/// of the stream (context takeover).
pub(crate) fn inspect(payload: &[u8], history: &mut Vec<u8>) -> usize {
    let mut data = payload.to_vec();
    data.extend_from_slice(&SYNC_TAIL);
    let mut br = BitReader {
        data: &data,
        bit: 0,
    };
    let mut max_dist = 0;
    while br.bit < data.len() * 8 {
        let last = br.bits(1);
        assert_eq!(last, 0, "unexpected final block");
        match br.bits(2) {
            0 => {
                br.align();
                let len = br.bits(16);
                let nlen = br.bits(16);
                assert_eq!(len ^ 0xffff, nlen);
                for _ in 0..len {
                    history.push(br.bits(8) as u8);
                }
            }
            t @ (1 | 2) => {
                let (lit, dist) = if t == 1 {
                    let mut l = [8u8; 288];
                    l[144..256].fill(9);
                    l[256..280].fill(7);
                    (Huffman::new(&l), Huffman::new(&[5u8; 30]))
                } else {
                    let hlit = br.bits(5) as usize + 257;
                    let hdist = br.bits(5) as usize + 1;
                    let hclen = br.bits(4) as usize + 4;
                    const ORDER: [usize; 19] = [
                        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                    ];
                    let mut cl = [0u8; 19];
                    for &o in &ORDER[..hclen] {
                        cl[o] = br.bits(3) as u8;
                    }
                    let clh = Huffman::new(&cl);
                    let mut lengths = Vec::with_capacity(hlit + hdist);
                    while lengths.len() < hlit + hdist {
                        match clh.decode(&mut br) {
                            s @ 0..=15 => lengths.push(s as u8),
                            16 => {
                                let prev = *lengths.last().unwrap();
                                for _ in 0..3 + br.bits(2) {
                                    lengths.push(prev);
                                }
                            }
                            17 => lengths.resize(lengths.len() + 3 + br.bits(3) as usize, 0),
                            _ => lengths.resize(lengths.len() + 11 + br.bits(7) as usize, 0),
                        }
                    }
                    (
                        Huffman::new(&lengths[..hlit]),
                        Huffman::new(&lengths[hlit..]),
                    )
                };
                loop {
                    let sym = lit.decode(&mut br) as usize;
                    match sym {
                        0..=255 => history.push(sym as u8),
                        256 => break,
                        _ => {
                            let i = sym - 257;
                            let len =
                                LEN_BASE[i] as usize + br.bits(u32::from(LEN_EXTRA[i])) as usize;
                            let di = dist.decode(&mut br) as usize;
                            let d = DIST_BASE[di] as usize
                                + br.bits(u32::from(DIST_EXTRA[di])) as usize;
                            assert!(d <= history.len());
                            max_dist = max_dist.max(d);
                            for _ in 0..len {
                                history.push(history[history.len() - d]);
                            }
                        }
                    }
                }
            }
            _ => panic!("block type 3"),
        }
    }
    max_dist
}
