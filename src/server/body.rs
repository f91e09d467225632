//! The webhook's response body: the bytes the handler wrote, sent as one frame.
//!
//! Why not axum's `Body`: it boxes every body and turns a `Vec` into `Bytes`, which costs two
//! allocations per admission request for an answer that is already one buffer.

use std::convert::Infallible;
use std::io::Cursor;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};

use super::budget::AnswerHeld;

pub(crate) type Response = http::Response<ResponseBody>;

/// A whole body in one buffer, `None` once sent, and the body budget it holds
/// ([`AnswerHeld`]) until hyper has written it and drops it.
pub(crate) struct ResponseBody(Option<Answer>);

/// The bytes of an answer and the budget they hold.
#[derive(Debug)]
pub(crate) struct Answer {
    bytes: Cursor<Vec<u8>>,
    _held: Option<AnswerHeld>,
}

impl From<Vec<u8>> for ResponseBody {
    fn from(bytes: Vec<u8>) -> Self {
        ResponseBody(Some(Answer { bytes: Cursor::new(bytes), _held: None }))
    }
}

impl ResponseBody {
    /// `bytes`, holding `held` until they are written.
    pub(crate) fn holding(bytes: Vec<u8>, held: AnswerHeld) -> Self {
        ResponseBody(Some(Answer { bytes: Cursor::new(bytes), _held: Some(held) }))
    }
}

impl Buf for Answer {
    fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.bytes.chunk()
    }

    fn advance(&mut self, n: usize) {
        self.bytes.advance(n);
    }
}

impl Body for ResponseBody {
    type Data = Answer;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Infallible>>> {
        Poll::Ready(self.get_mut().0.take().filter(|b| b.remaining() > 0).map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(|b| b.remaining() == 0)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, Buf::remaining) as u64)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn collect(body: ResponseBody) -> (Vec<u8>, usize) {
        let mut body = std::pin::pin!(body);
        let (mut out, mut frames) = (Vec::new(), 0);
        while let Some(frame) = body.frame().await {
            let mut data = frame.expect("no error").into_data().expect("data frame");
            while data.has_remaining() {
                let chunk = data.chunk().to_vec();
                data.advance(chunk.len());
                out.extend_from_slice(&chunk);
            }
            frames += 1;
        }
        (out, frames)
    }

    #[tokio::test]
    async fn sends_its_bytes_once_with_an_exact_size() {
        let cases: [(&str, ResponseBody, &[u8], usize); 2] = [
            ("full", ResponseBody::from(b"{\"a\":1}".to_vec()), b"{\"a\":1}", 1),
            ("empty", ResponseBody::from(Vec::new()), b"", 0),
        ];
        for (name, body, want, frames) in cases {
            assert_eq!(body.size_hint().exact(), Some(want.len() as u64), "{name}: size hint");
            assert_eq!(body.is_end_stream(), want.is_empty(), "{name}: end of stream");
            let (got, got_frames) = collect(body).await;
            assert_eq!((got.as_slice(), got_frames), (want, frames), "{name}");
        }
    }
}
