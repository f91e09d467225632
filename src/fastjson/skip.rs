//! Finding where a JSON value ends without reading it: the hot path skips most of a 5 KB review
//! (managedFields, the trainer spec, userInfo) and this is where that time goes.
//!
//! Containers are skipped 64 bytes at a time, simdjson-style: one pass builds bit masks of the
//! quotes, backslashes and brackets in the block, a prefix XOR of the unescaped quotes marks what
//! lies inside strings, and only the brackets outside strings are walked, against a bit stack of
//! the open containers' kinds. What is checked is the structure: strings close, brackets balance
//! and every closing bracket matches the kind of the one it closes (`[}` fails here as it does in
//! serde_json), at most [`MAX_DEPTH`] deep. The grammar inside a skipped container (commas, colons, scalars, UTF-8) is not checked;
//! the API server only sends JSON it encoded itself, and every value a rule reads is parsed in
//! full (see `docs/webhook.md`, "Decoding").

/// Why a skip failed; the deserializer then hands the body to serde_json, which reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipError {
    /// The input ended inside the value.
    Eof,
    /// A closing bracket of the wrong kind, nesting deeper than [`MAX_DEPTH`], or an unexpected
    /// byte.
    Syntax,
}

const BLOCK: usize = 64;

/// Deepest nesting a skip follows (one bit per level in a `u128`). Deeper values make the skip
/// fail, and the caller hands the body to serde_json: a slower answer, never a different one.
/// Kubernetes objects are nowhere near this deep.
pub const MAX_DEPTH: u32 = 128;

/// The bit masks of one 64-byte block: bit `i` stands for byte `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    /// `{` or `[`
    pub open: u64,
    /// `}` or `]`
    pub close: u64,
    /// `{` or `}`: among the brackets, the curly ones.
    pub curly: u64,
    /// Bytes with the high bit set (not ASCII).
    pub high: u64,
}

/// Masks of a block, byte by byte: the reference the SIMD version is tested against, and the
/// version used on targets without SSE2.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))] // the SIMD builders' reference in tests
pub(crate) fn masks_scalar(block: &[u8; BLOCK]) -> Masks {
    let mut m = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match b {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'[' => m.open |= bit,
            b'}' | b']' => m.close |= bit,
            _ => {}
        }
        if b == b'{' || b == b'}' {
            m.curly |= bit;
        }
        if !b.is_ascii() {
            m.high |= bit;
        }
    }
    m
}

/// How a block's masks are built: SSE2 (part of x86_64), AVX2 when the CPU has it, or byte by
/// byte elsewhere.
trait MaskBuilder {
    fn masks(block: &[u8; BLOCK]) -> Masks;

    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        prefix_xor(x)
    }
}

#[cfg(not(target_arch = "x86_64"))]
struct Scalar;

#[cfg(not(target_arch = "x86_64"))]
impl MaskBuilder for Scalar {
    #[inline(always)]
    fn masks(block: &[u8; BLOCK]) -> Masks {
        masks_scalar(block)
    }
}

#[cfg(target_arch = "x86_64")]
struct Sse2;

#[cfg(target_arch = "x86_64")]
impl MaskBuilder for Sse2 {
    #[inline(always)]
    fn masks(block: &[u8; BLOCK]) -> Masks {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_slli_epi16,
        };
        // SAFETY: SSE2 is always available on x86_64; each load reads 16 bytes inside `block`.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            // `{` (0x7B) and `[` (0x5B) differ only in bit 0x20, as do `}` and `]`.
            let case = _mm_set1_epi8(0x20);
            let open = _mm_set1_epi8(b'{' as i8);
            let close = _mm_set1_epi8(b'}' as i8);
            let mut m = Masks::default();
            for lane in 0..4 {
                let v = _mm_loadu_si128(block.as_ptr().add(lane * 16) as *const __m128i);
                let folded = _mm_or_si128(v, case);
                let shift = lane * 16;
                let bits = |x| (_mm_movemask_epi8(x) as u32 as u64) << shift;
                m.quote |= bits(_mm_cmpeq_epi8(v, quote));
                m.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
                m.open |= bits(_mm_cmpeq_epi8(folded, open));
                m.close |= bits(_mm_cmpeq_epi8(folded, close));
                // Bit 0x20 of each byte moved to its sign bit: set for `{` `}`, clear for `[` `]`.
                m.curly |= bits(_mm_slli_epi16(v, 2));
                m.high |= bits(v);
            }
            m.curly &= m.open | m.close;
            m
        }
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl MaskBuilder for Avx2 {
    #[inline(always)]
    fn masks(block: &[u8; BLOCK]) -> Masks {
        // SAFETY: `Avx2` is only used inside `container_avx2`, which runs where AVX2 was detected.
        unsafe { masks_avx2(block) }
    }

    /// One carry-less multiplication by all ones instead of six dependent shift-and-xor steps.
    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        use std::arch::x86_64::{_mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_set1_epi8};
        // SAFETY: `Avx2` is only used inside `container_avx2`, which runs where PCLMULQDQ was
        // detected too.
        unsafe {
            let product = _mm_clmulepi64_si128::<0>(_mm_set_epi64x(0, x as i64), _mm_set1_epi8(-1));
            _mm_cvtsi128_si64(product) as u64
        }
    }
}

/// The AVX2 mask builder; compiled for AVX2, so it may only run where the CPU has it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn masks_avx2(block: &[u8; BLOCK]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
        _mm256_slli_epi16,
    };
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let case = _mm256_set1_epi8(0x20);
    let open = _mm256_set1_epi8(b'{' as i8);
    let close = _mm256_set1_epi8(b'}' as i8);
    let mut m = Masks::default();
    for lane in 0..2 {
        // SAFETY: the load reads 32 bytes inside `block`.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(lane * 32) as *const __m256i) };
        let folded = _mm256_or_si256(v, case);
        let shift = lane * 32;
        let bits = |x| (_mm256_movemask_epi8(x) as u32 as u64) << shift;
        m.quote |= bits(_mm256_cmpeq_epi8(v, quote));
        m.backslash |= bits(_mm256_cmpeq_epi8(v, backslash));
        m.open |= bits(_mm256_cmpeq_epi8(folded, open));
        m.close |= bits(_mm256_cmpeq_epi8(folded, close));
        m.curly |= bits(_mm256_slli_epi16(v, 2));
        m.high |= bits(v);
    }
    m.curly &= m.open | m.close;
    m
}

/// Bit `i` set when byte `i` is escaped by an odd run of backslashes. `carry` says the first
/// byte is escaped (the previous block ended in such a run) and is updated for the next block.
/// Branch-free, as simdjson finds escapes: managedFields keys (`k:{\"name\":…}`) put a few
/// backslashes in most blocks of a large review, and walking them one by one cost about an
/// eighth of its skip.
#[inline(always)]
pub(crate) fn escaped(backslash: u64, carry: &mut bool) -> u64 {
    const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    let escaped_first = u64::from(*carry);
    // Backslashes that may start a run (the first byte's, if escaped, does not).
    let starts = backslash & !escaped_first;
    // simdjson's arithmetic: subtracting each run's first backslash from the odd bits carries
    // through the run, so that after the XOR the bit just past a run is set exactly when the
    // run is odd (whichever parity of position it started on); inside a run, every second
    // backslash is marked as escaped. The tests hold it to a byte-by-byte walk.
    let codes = ((starts << 1 | ODD_BITS).wrapping_sub(starts)) ^ ODD_BITS;
    let escaped = codes ^ (backslash | escaped_first);
    // A backslash that escapes the next block's first byte.
    *carry = (codes & backslash) >> 63 != 0;
    escaped
}

/// Bit `i` set when an odd number of bits `0..=i` are set: with the quotes, "inside a string"
/// (opening quote included, closing quote excluded).
#[inline(always)]
pub(crate) fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// `input[start]` is `{` or `[`: the index just past its matching closing bracket.
pub fn container(input: &[u8], start: usize) -> Result<usize, SkipError> {
    dispatch::<false>(input, start).map(|(end, _)| end)
}

/// [`container`], and whether every byte of the value is ASCII (then it is valid UTF-8 without
/// another pass). `false` may also mean a non-ASCII byte shortly after the value.
pub fn container_ascii(input: &[u8], start: usize) -> Result<(usize, bool), SkipError> {
    dispatch::<true>(input, start)
}

/// The skip for this CPU; `ASCII` says whether to look for non-ASCII bytes on the way (a few
/// per cent of the skip, so only raw values, which must be UTF-8, ask for it).
#[inline(always)]
fn dispatch<const ASCII: bool>(input: &[u8], start: usize) -> Result<(usize, bool), SkipError> {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2_skip_available() {
            // SAFETY: the CPU has the features `container_avx2` is compiled for.
            return unsafe { container_avx2::<ASCII>(input, start) };
        }
        container_with::<Sse2, ASCII>(input, start)
    }
    #[cfg(not(target_arch = "x86_64"))]
    container_with::<Scalar, ASCII>(input, start)
}

/// Whether [`container_avx2`] may run here. Each check reads a cached flag after the first call.
#[cfg(target_arch = "x86_64")]
fn avx2_skip_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,bmi1,pclmulqdq")]
unsafe fn container_avx2<const ASCII: bool>(input: &[u8], start: usize) -> Result<(usize, bool), SkipError> {
    container_with::<Avx2, ASCII>(input, start)
}

#[inline(always)]
fn container_with<M: MaskBuilder, const ASCII: bool>(input: &[u8], start: usize) -> Result<(usize, bool), SkipError> {
    debug_assert!(input[start] == b'{' || input[start] == b'[');
    let mut depth: u32 = 0;
    // The kinds of the open containers, innermost in bit 0: 1 for `{`, 0 for `[`.
    let mut kinds: u128 = 0;
    let mut in_string: u64 = 0; // all ones when the previous block ended inside a string
    let mut escape_carry = false;
    let mut high = 0u64;
    let mut offset = start;
    while offset < input.len() {
        let m = match input.get(offset..offset + BLOCK) {
            Some(full) => M::masks(full.try_into().expect("64 bytes")),
            None => tail_masks(&input[offset..]),
        };
        if ASCII {
            high |= m.high;
        }
        let escaped = if m.backslash == 0 && !escape_carry { 0 } else { escaped(m.backslash, &mut escape_carry) };
        let strings = M::prefix_xor(m.quote & !escaped) ^ in_string;
        in_string = ((strings as i64) >> 63) as u64;
        // Escaped brackets exist only outside strings in invalid JSON; like escaped quotes, they
        // do not count.
        let open = m.open & !strings & !escaped;
        let close = m.close & !strings & !escaped;
        // Every bracket is walked (not only counted) so that each closing one is checked against
        // the kind on top of the stack. (A branch-free walk was tried: its chain of dependent
        // selects made the skip ~75 % slower than letting the CPU predict these branches.)
        let mut brackets = open | close;
        while brackets != 0 {
            let i = brackets.trailing_zeros();
            brackets &= brackets - 1;
            let bit = 1u64 << i;
            let curly = u128::from(m.curly & bit != 0);
            if open & bit != 0 {
                if depth == MAX_DEPTH {
                    return Err(SkipError::Syntax);
                }
                kinds = kinds << 1 | curly;
                depth += 1;
            } else {
                if kinds & 1 != curly {
                    return Err(SkipError::Syntax);
                }
                kinds >>= 1;
                depth -= 1;
                if depth == 0 {
                    return Ok((offset + i as usize + 1, ASCII && high == 0));
                }
            }
        }
        offset += BLOCK;
    }
    Err(SkipError::Eof)
}

/// The last, short block, padded with spaces.
#[inline(never)]
fn tail_masks(tail: &[u8]) -> Masks {
    let mut padded = [b' '; BLOCK];
    padded[..tail.len()].copy_from_slice(tail);
    #[cfg(target_arch = "x86_64")]
    return Sse2::masks(&padded);
    #[cfg(not(target_arch = "x86_64"))]
    masks_scalar(&padded)
}

/// The index of the first byte at or after `at` that is not JSON whitespace. Always inlined: the
/// decoder calls it before every token, and a plain `#[inline]` cost ~3 % of a small decision.
#[inline(always)]
pub fn whitespace(input: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = input.get(at) {
        at += 1;
    }
    at
}

/// `input[start]` is `"`: the index just past the closing quote. The content is not checked.
pub fn string(input: &[u8], start: usize) -> Result<usize, SkipError> {
    let run = plain_run(input, start + 1);
    if run.at_quote {
        return Ok(run.end + 1);
    }
    let mut i = run.end;
    while i < input.len() {
        match input[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err(SkipError::Eof)
}

/// Where [`plain_run`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// The first byte that can end a string, or near the end of the input, where the caller
    /// goes on byte by byte.
    pub end: usize,
    /// A non-ASCII byte was passed.
    pub non_ascii: bool,
    /// `input[end]` is known to be `"`, so the caller need not load it again: the usual string
    /// ends here, and reading that byte back would lengthen the chain every string waits on.
    pub at_quote: bool,
}

/// From `i`, past the bytes that cannot end a string (anything but `"`, `\\` and control
/// characters), a block at a time.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn plain_run(input: &[u8], mut i: usize) -> Run {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut non_ascii = 0u32;
    while let Some(chunk) = input.get(i..i + 16) {
        // SAFETY: SSE2 is part of x86_64; the load reads the 16 bytes of `chunk`.
        let (stops, quote, high) = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let stops = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32;
            (stops, quote, _mm_movemask_epi8(v) as u32)
        };
        if stops != 0 {
            let before = stops.trailing_zeros();
            // SAFETY: as above (the quotes' mask is only needed in the chunk where the run stops).
            let quotes = unsafe { _mm_movemask_epi8(quote) } as u32;
            return Run {
                end: i + before as usize,
                non_ascii: non_ascii | (high & ((1 << before) - 1)) != 0,
                at_quote: quotes & stops & stops.wrapping_neg() != 0,
            };
        }
        non_ascii |= high;
        i += 16;
    }
    Run { end: i, non_ascii: non_ascii != 0, at_quote: false }
}

/// See the x86_64 version; eight bytes at a time in a `u64` elsewhere.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn plain_run(input: &[u8], mut i: usize) -> Run {
    const fn splat(b: u8) -> u64 {
        u64::from_le_bytes([b; 8])
    }
    // Non-zero when some byte of `w` is below `n` (`n` <= 0x80); the lowest flagged byte is exact.
    let below = |w: u64, n: u8| w.wrapping_sub(splat(n)) & !w & splat(0x80);
    let mut high = 0u64;
    while let Some(word) = input.get(i..i + 8) {
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let stops = below(w ^ splat(b'"'), 1) | below(w ^ splat(b'\\'), 1) | below(w, 0x20);
        if stops != 0 {
            let before = stops.trailing_zeros() / 8;
            high |= w & ((1u64 << (before * 8)) - 1);
            return Run {
                end: i + before as usize,
                non_ascii: high & splat(0x80) != 0,
                at_quote: (w >> (before * 8)) as u8 == b'"',
            };
        }
        high |= w;
        i += 8;
    }
    Run { end: i, non_ascii: high & splat(0x80) != 0, at_quote: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obvious byte-at-a-time skip, for comparison: a stack of the open brackets, each
    /// closing one must match the top.
    fn container_reference(input: &[u8], start: usize) -> Result<usize, SkipError> {
        let mut stack: Vec<u8> = Vec::new();
        let mut i = start;
        let mut in_string = false;
        while i < input.len() {
            let b = input[i];
            if b == b'\\' {
                // Outside strings too, like the masks (only invalid JSON has one there).
                i += 2;
                continue;
            }
            if in_string {
                if b == b'"' {
                    in_string = false;
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => {
                        if stack.len() == MAX_DEPTH as usize {
                            return Err(SkipError::Syntax);
                        }
                        stack.push(b);
                    }
                    b'}' | b']' => {
                        let top = stack.pop().expect("the opener is pushed first");
                        if (top == b'{') != (b == b'}') {
                            return Err(SkipError::Syntax);
                        }
                        if stack.is_empty() {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        Err(SkipError::Eof)
    }

    /// Small deterministic generator so the test needs no extra crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn simd_masks_match_the_scalar_masks() {
        let alphabet = b"\"\\{}[]a :,\x7b\x5b\xff\x00";
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut block = [0u8; BLOCK];
            for b in block.iter_mut() {
                *b = alphabet[(rng.next() % alphabet.len() as u64) as usize];
            }
            #[cfg(target_arch = "x86_64")]
            {
                assert_eq!(Sse2::masks(&block), masks_scalar(&block), "block {block:?}");
                if std::arch::is_x86_feature_detected!("avx2") {
                    assert_eq!(Avx2::masks(&block), masks_scalar(&block), "block {block:?}");
                }
            }
        }
    }

    #[test]
    fn escapes_match_a_byte_walk() {
        let mut rng = Rng(7);
        for _ in 0..20_000 {
            // Runs of backslashes of every length, across block boundaries.
            let mut bytes = [0u8; 3 * BLOCK];
            for b in bytes.iter_mut() {
                *b = if rng.next().is_multiple_of(3) { b'a' } else { b'\\' };
            }
            let mut expected = vec![false; bytes.len()];
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    expected[i + 1] = true;
                    i += 2;
                } else {
                    i += 1;
                }
            }
            let mut carry = false;
            for (n, chunk) in bytes.chunks(BLOCK).enumerate() {
                let block: &[u8; BLOCK] = chunk.try_into().unwrap();
                let got = escaped(masks_scalar(block).backslash, &mut carry);
                for bit in 0..BLOCK {
                    assert_eq!(got >> bit & 1 == 1, expected[n * BLOCK + bit], "byte {}", n * BLOCK + bit);
                }
            }
        }
    }

    #[test]
    fn prefix_xor_marks_string_interiors() {
        // quotes at 2 and 5: bytes 2..5 inside.
        assert_eq!(prefix_xor(0b100100), 0b011100);
        assert_eq!(prefix_xor(0), 0);
        assert_eq!(prefix_xor(1 << 63), 1 << 63);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn carry_less_prefix_xor_matches_the_shifts() {
        if !avx2_skip_available() {
            return;
        }
        let mut rng = Rng(11);
        for x in [0, 1, u64::MAX, 1 << 63, 0x8000_0000_0000_0001].into_iter().chain((0..10_000).map(|_| rng.next())) {
            assert_eq!(<Avx2 as MaskBuilder>::prefix_xor(x), prefix_xor(x), "{x:#x}");
        }
    }

    type Skipper = fn(&[u8], usize) -> Result<(usize, bool), SkipError>;

    type EndSkipper = fn(&[u8], usize) -> Result<usize, SkipError>;

    /// Every mask builder this CPU can run, with and without the ASCII check, so the random
    /// tests below cover each (the ASCII flag has its own test).
    fn skippers() -> Vec<(&'static str, EndSkipper)> {
        let mut all: Vec<(&'static str, EndSkipper)> =
            vec![("dispatch", container), ("dispatch, ascii", |i, s| container_ascii(i, s).map(|r| r.0))];
        #[cfg(target_arch = "x86_64")]
        {
            all.push(("sse2", |i, s| container_with::<Sse2, false>(i, s).map(|r| r.0)));
            all.push(("sse2, ascii", |i, s| container_with::<Sse2, true>(i, s).map(|r| r.0)));
            if avx2_skip_available() {
                all.push(("avx2", |i, s| unsafe { container_avx2::<false>(i, s) }.map(|r| r.0)));
                all.push(("avx2, ascii", |i, s| unsafe { container_avx2::<true>(i, s) }.map(|r| r.0)));
            }
        }
        all
    }

    fn ascii_skippers() -> Vec<(&'static str, Skipper)> {
        let mut all: Vec<(&'static str, Skipper)> = vec![("dispatch", container_ascii)];
        #[cfg(target_arch = "x86_64")]
        {
            all.push(("sse2", container_with::<Sse2, true>));
            if avx2_skip_available() {
                all.push(("avx2", |input, start| unsafe { container_avx2::<true>(input, start) }));
            }
        }
        all
    }

    /// An ASCII verdict must never be wrong: a value said to be ASCII is taken as UTF-8 unchecked.
    #[test]
    fn container_reports_ascii_values() {
        let cases: &[(&[u8], Option<bool>)] = &[
            (br#"{"a":"b"} x"#, Some(true)),
            ("{\"a\":\"\u{e9}\"}".as_bytes(), Some(false)),
            ("[\"\u{1F600}\",1]".as_bytes(), Some(false)),
            (b"{\"a\":\"\xff\"}", Some(false)),
            // ASCII, but a non-ASCII byte after it shares its block: either answer is safe.
            ("{\"a\":[1]} \u{e9}".as_bytes(), None),
        ];
        for (name, skip) in ascii_skippers() {
            for (input, expected) in cases {
                let (_, ascii) = skip(input, 0).unwrap_or_else(|e| panic!("{name}: {input:?}: {e:?}"));
                if let Some(expected) = expected {
                    assert_eq!(ascii, *expected, "{name}: {}", String::from_utf8_lossy(input));
                }
            }
            let mut rng = Rng(7);
            let alphabet = b"{}[]\"\"\\a,: \xc3\xa9";
            for round in 0..50_000 {
                let mut bytes = vec![if round % 2 == 0 { b'[' } else { b'{' }];
                for _ in 0..1 + rng.next() % 200 {
                    bytes.push(alphabet[(rng.next() % alphabet.len() as u64) as usize]);
                }
                if let Ok((end, ascii)) = skip(&bytes, 0) {
                    assert!(!ascii || bytes[..end].is_ascii(), "{name}: {}", String::from_utf8_lossy(&bytes));
                    assert!(ascii || !bytes.is_ascii(), "{name}: {}", String::from_utf8_lossy(&bytes));
                }
            }
        }
    }

    #[test]
    fn container_cases() {
        let cases: &[(&str, Result<usize, SkipError>)] = &[
            ("{}", Ok(2)),
            ("[]", Ok(2)),
            ("{} trailing", Ok(2)),
            (r#"{"a":[1,2,{"b":"}"}]}"#, Ok(21)),
            (r#"{"a":"\"}"}"#, Ok(11)),
            (r#"{"a":"\\"}"#, Ok(10)),
            (r#"{"a":"\\\"}"}"#, Ok(13)),
            ("{]", Err(SkipError::Syntax)),
            ("[}", Err(SkipError::Syntax)),
            // Inner brackets of the wrong kind, where the depth alone balances.
            (r#"{"a":[}{]}"#, Err(SkipError::Syntax)),
            (r#"[{]}"#, Err(SkipError::Syntax)),
            (r#"{"a":[{"b":[}]}]}"#, Err(SkipError::Syntax)),
            (r#"[[[]]}"#, Err(SkipError::Syntax)),
            (r#"{"a":"[}"}"#, Ok(10)),
            ("{", Err(SkipError::Eof)),
            (r#"{"a":"}"#, Err(SkipError::Eof)),
            (r#"["\"]"#, Err(SkipError::Eof)),
        ];
        for (name, skip) in skippers() {
            for (input, expected) in cases {
                assert_eq!(skip(input.as_bytes(), 0), *expected, "{name}: {input}");
            }
        }
    }

    /// Random containers (`rounds` of them, opened by `[` every `list_every` rounds, else `{`,
    /// up to `max_len` bytes from `byte`) skipped by every skipper as the reference skips them;
    /// returns how many ended.
    fn random_containers_match_the_reference(
        rng: &mut Rng,
        rounds: usize,
        list_every: usize,
        max_len: u64,
        mut byte: impl FnMut(u64) -> u8,
    ) -> usize {
        let mut ended = 0;
        for round in 0..rounds {
            let mut bytes = vec![if round % list_every == 0 { b'[' } else { b'{' }];
            for _ in 0..1 + rng.next() % max_len {
                bytes.push(byte(rng.next()));
            }
            let expected = container_reference(&bytes, 0);
            for (name, skip) in skippers() {
                assert_eq!(skip(&bytes, 0), expected, "{name}: {}", String::from_utf8_lossy(&bytes));
            }
            ended += usize::from(expected.is_ok());
        }
        ended
    }

    #[test]
    fn container_matches_the_reference_on_random_json_like_input() {
        let alphabet = br#"{}[]""\\a,: "#;
        let pick = |r: u64| alphabet[(r % alphabet.len() as u64) as usize];
        let ended = random_containers_match_the_reference(&mut Rng(42), 200_000, 2, 300, pick);
        // The alphabet must produce both finished and unfinished containers to mean anything.
        assert!(ended > 10_000 && ended < 190_000, "{ended} of 200000 inputs ended");
    }

    /// The shape of managedFields: long runs of curly brackets and escaped quotes, with a rare
    /// list.
    #[test]
    fn managed_fields_shaped_input_matches_the_reference() {
        let alphabet = br#"{{{}}}}{}""\\a:,"#;
        let pick = |r: u64| match r % 97 {
            0 => b'[',
            1 => b']',
            _ => alphabet[(r / 97 % alphabet.len() as u64) as usize],
        };
        let ended = random_containers_match_the_reference(&mut Rng(9), 100_000, 3, 700, pick);
        assert!(ended > 5_000 && ended < 95_000, "{ended} of 100000 inputs ended");
    }

    #[test]
    fn long_containers_cross_blocks() {
        for pad in 0..200 {
            let inner = "x".repeat(pad);
            let text = format!(r#"{{"k":["{inner}",{{"q":"\"{inner}\\"}}],"z":{{}}}} tail"#);
            let expected = text.len() - " tail".len();
            for (name, skip) in skippers() {
                assert_eq!(skip(text.as_bytes(), 0), Ok(expected), "{name}: {text}");
            }
            assert_eq!(container_reference(text.as_bytes(), 0), Ok(expected));
        }
    }

    #[test]
    fn nesting_is_followed_to_serde_jsons_limit() {
        for (depth, expected) in
            [(1, Ok(2)), (MAX_DEPTH, Ok(2 * MAX_DEPTH as usize)), (MAX_DEPTH + 1, Err(SkipError::Syntax))]
        {
            let mixed: String = (0..depth).map(|i| if i % 2 == 0 { '[' } else { '{' }).collect();
            // Curly only, and a list at the bottom.
            let curly: String = (0..depth).map(|_| '{').collect();
            let listed: String = (0..depth).map(|i| if i == 0 { '[' } else { '{' }).collect();
            for opening in [mixed, curly, listed] {
                let closing: String = opening.chars().rev().map(|c| if c == '[' { ']' } else { '}' }).collect();
                // `{}` directly inside `[` is fine for the skip (it checks structure, not grammar).
                let input = format!("{opening}{closing}");
                for (name, skip) in skippers() {
                    assert_eq!(skip(input.as_bytes(), 0), expected, "{name}: {input}");
                }
                assert_eq!(container_reference(input.as_bytes(), 0), expected, "reference: {input}");
            }
        }
    }

    /// The first byte that can end a string, at every position of and across the 16-byte
    /// chunks: where the run stops, and whether it says the stop is a quote.
    #[test]
    fn plain_run_stops_at_the_first_special_byte() {
        for stop in [b'"', b'\\', 0x00, 0x1f] {
            for at in 0..40 {
                for high in [false, true] {
                    let mut text = vec![if high { 0xc3 } else { b'a' }; at];
                    text.push(stop);
                    text.extend_from_slice(b"\"tail, long enough for one more chunk");
                    let run = plain_run(&text, 0);
                    // The run may stop early only near the end of the input (it never does here).
                    assert_eq!(run.end, at, "stop {stop:#x} at {at}");
                    assert_eq!(run.at_quote, stop == b'"', "stop {stop:#x} at {at}");
                    assert_eq!(run.non_ascii, high && at > 0, "stop {stop:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn strings() {
        assert_eq!(string(br#""abc" x"#, 0), Ok(5));
        assert_eq!(string(br#""a\"c" x"#, 0), Ok(6));
        assert_eq!(string(br#""a\\" x"#, 0), Ok(5));
        assert_eq!(string(br#""abc"#, 0), Err(SkipError::Eof));
        assert_eq!(string(br#""a\"#, 0), Err(SkipError::Eof));
    }
}
